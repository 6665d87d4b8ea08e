/**
 * The keys of a JSON text's objects at the places a rule reads, as the text spells them — each decoded
 * ("\u0071uery" is "query") and kept in order with its duplicates, which `JSON.parse` drops (it keeps the
 * last; other parsers keep the first, and Go's matches a key in any case). A place is a path of keys from
 * the top, "[]" for an array's items: "" is the top-level object, "params" the object under its "params",
 * "[].params" that of each call of a batch. Run on a text that already parsed.
 */
export const keysAt = (text: string, places: ReadonlySet<string>): Map<string, Array<ReadonlyArray<string>>> => {
  const found = new Map<string, Array<ReadonlyArray<string>>>()
  const deepest = Math.max(...[...places].map((p) => (p === "" ? 0 : p.split(".").length)))
  interface Open {
    readonly object: boolean
    readonly place: string | null
    readonly keys: Array<string> | null
    key: string | undefined
    expectKey: boolean
  }
  const stack: Array<Open> = []
  const placeOfChild = (): string | null => {
    const top = stack.at(-1)
    if (top === undefined) return ""
    if (top.place === null || stack.length >= deepest + 1) return null
    const step = top.object ? top.key ?? "" : "[]"
    // A key with a "." would read as two steps: such a place is never one a rule reads.
    if (step.includes(".")) return null
    return top.place === "" ? step : `${top.place}.${step}`
  }
  let i = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c === 0x7b || c === 0x5b) {
      const place = placeOfChild()
      const object = c === 0x7b
      stack.push({ object, place, keys: object && place !== null && places.has(place) ? [] : null, key: undefined, expectKey: object })
      i++
    } else if (c === 0x7d || c === 0x5d) {
      const closed = stack.pop()
      if (closed?.keys && closed.place !== null) {
        const list = found.get(closed.place) ?? []
        list.push(closed.keys)
        found.set(closed.place, list)
      }
      i++
    } else if (c === 0x22) {
      let j = i + 1
      while (j < text.length && text.charCodeAt(j) !== 0x22) j += text.charCodeAt(j) === 0x5c ? 2 : 1
      const top = stack.at(-1)
      if (top?.object && top.expectKey) {
        const decoded: unknown = JSON.parse(text.slice(i, j + 1))
        const key = typeof decoded === "string" ? decoded : ""
        top.key = key
        top.keys?.push(key)
        top.expectKey = false
      }
      i = j + 1
    } else if (c === 0x2c) {
      const top = stack.at(-1)
      if (top?.object) top.expectKey = true
      i++
    } else {
      i++
    }
  }
  return found
}

/**
 * Why the objects at a place have no single reading, or undefined: one of `controls` given twice, or in
 * another case than its own (alone or beside it) — a server that matches keys without regard to case
 * would read `Query` where roster read `query`, or the one roster did not.
 */
export const controlKeyProblem = (objects: ReadonlyArray<ReadonlyArray<string>> | undefined, controls: ReadonlyArray<string>, where: string) => {
  for (const keys of objects ?? []) {
    for (const control of controls) {
      const spelled = keys.filter((k) => k.toLowerCase() === control.toLowerCase())
      if (spelled.length > 1) return `${where} gives "${control}" ${spelled.length} times (${spelled.map((k) => JSON.stringify(k)).join(", ")})`
      const other = spelled.find((k) => k !== control)
      if (other !== undefined) return `${where} spells "${control}" as ${JSON.stringify(other)}`
    }
  }
  return undefined
}
