/**
 * Why `text` cannot be a worker's identity, or undefined when it can: it is the head of every
 * run's system prompt, so it must say something, fit `[box] identity_max`, and hold no NUL (which
 * would cut the prompt short where a program reads it as C text).
 */
export const identityProblem = (text: string, max: number): string | undefined =>
  text.trim() === ""
    ? "it is empty: say who the worker is (its role, how it works, what it must never do)"
    : text.includes("\u0000")
    ? `it holds a NUL character (at character ${text.indexOf("\u0000") + 1}): remove it`
    : text.length > max
    ? `it is ${text.length} characters, over [box] identity_max (${max}): shorten it, or raise identity_max in org.toml`
    : undefined

/** The first `lines` lines of an identity and how big it is, as `worker show` and `worker edit` say it. */
export const identitySummary = (text: string, lines = 8) => {
  const all = text.trimEnd().split("\n")
  return { head: all.slice(0, lines), lines: all.length, characters: text.length, more: Math.max(0, all.length - lines) }
}
