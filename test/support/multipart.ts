/** Test support: reading a multipart/form-data body as the services (Slack's uploads, Discord's messages with files) do. */

/** A multipart/form-data body's parts: each one's field name, file name and bytes (as Discord reads a message with files). */
export const multipart = (raw: Buffer, contentType: string) => {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType)
  const mark = Buffer.from(`--${boundary?.[1] ?? boundary?.[2] ?? ""}`)
  const parts: Array<{ name: string; filename: string | undefined; bytes: Buffer }> = []
  let at = raw.indexOf(mark)
  while (at >= 0) {
    const next = raw.indexOf(mark, at + mark.length)
    if (next < 0) break
    const part = raw.subarray(at + mark.length + 2, next - 2)
    const split = part.indexOf("\r\n\r\n")
    const head = part.subarray(0, split).toString("utf8")
    parts.push({
      name: /name="([^"]*)"/.exec(head)?.[1] ?? "",
      filename: /filename="([^"]*)"/.exec(head)?.[1],
      bytes: part.subarray(split + 4)
    })
    at = next
  }
  return parts
}
