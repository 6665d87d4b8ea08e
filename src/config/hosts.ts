/** One form of a host name for policy and dialling alike: lower case, no trailing dot, no brackets. */
export const normalizeHost = (host: string): string => {
  let h = host.trim().toLowerCase()
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1)
  while (h.endsWith(".")) h = h.slice(0, -1)
  return h
}

/** "*.example.com" matches a subdomain (not the apex); anything else matches exactly, after normalising. */
export const hostMatches = (pattern: string, host: string): boolean => {
  const p = normalizeHost(pattern)
  if (p.startsWith("*.")) return host.endsWith(p.slice(1)) && host.length > p.length - 1
  return p === host
}

/** `hostMatches` for a pattern already normalised (org.toml's, as compiled): nothing made per call. */
export const normalHostMatches = (p: string, host: string): boolean =>
  p.charCodeAt(0) === 42 && p.charCodeAt(1) === 46 ? host.length > p.length - 1 && host.endsWith(p.slice(1)) : p === host
