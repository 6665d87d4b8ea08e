/**
 * The one operation a GraphQL document holds — its type (query, mutation, subscription) and name — read
 * from the document's top level only, so nothing inside a selection (a field, an alias, an argument, a
 * string) can pass for it: `query mutation { … }` is a query named "mutation". A document the gateway
 * cannot read, or with other than exactly one operation (fragments aside), has no single answer and is
 * refused instead of guessed (a persisted query with no document among them).
 */
export type GraphqlOperation =
  | { readonly ok: true; readonly type: "query" | "mutation" | "subscription"; readonly name: string | undefined }
  | { readonly ok: false; readonly why: string }

type Token = { readonly kind: "name"; readonly text: string } | { readonly kind: "punct"; readonly text: string } | { readonly kind: "string" }

const NAME = /[_A-Za-z][_0-9A-Za-z]*/y
const PUNCTUATORS = new Set(["!", "$", "&", "(", ")", ":", "=", "@", "[", "]", "{", "}", "|"])
const NUMBER = /-?\d+(\.\d+)?([eE][+-]?\d+)?/y

/** The document's tokens (names, punctuators, strings as one token each); a string saying why when it does not lex. */
const lex = (doc: string): Array<Token> | string => {
  const out: Array<Token> = []
  let i = 0
  while (i < doc.length) {
    const c = doc[i] as string
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "," || c === "\ufeff") {
      i++
    } else if (c === "#") {
      while (i < doc.length && doc[i] !== "\n" && doc[i] !== "\r") i++
    } else if (doc.startsWith('"""', i)) {
      const end = blockStringEnd(doc, i + 3)
      if (end < 0) return "an unterminated block string"
      out.push({ kind: "string" })
      i = end + 3
    } else if (c === '"') {
      let j = i + 1
      while (j < doc.length && doc[j] !== '"' && doc[j] !== "\n") j += doc[j] === "\\" ? 2 : 1
      if (doc[j] !== '"') return "an unterminated string"
      out.push({ kind: "string" })
      i = j + 1
    } else if (doc.startsWith("...", i)) {
      out.push({ kind: "punct", text: "..." })
      i += 3
    } else if (PUNCTUATORS.has(c)) {
      out.push({ kind: "punct", text: c })
      i++
    } else {
      NAME.lastIndex = i
      NUMBER.lastIndex = i
      const name = NAME.exec(doc)
      const number = name ? null : NUMBER.exec(doc)
      if (name) out.push({ kind: "name", text: name[0] })
      else if (number) out.push({ kind: "punct", text: "number" })
      else return `a character GraphQL does not have (${JSON.stringify(c)})`
      i += (name ?? number)?.[0].length ?? 1
    }
  }
  return out
}

const blockStringEnd = (doc: string, from: number) => {
  for (let i = from; i < doc.length; i++) {
    if (doc.startsWith('\\"""', i)) i += 3
    else if (doc.startsWith('"""', i)) return i
  }
  return -1
}

const OPERATION_TYPES = new Set(["query", "mutation", "subscription"])

/** The document's single operation, read from its top-level definitions. */
export const graphqlOperation = (doc: string): GraphqlOperation => {
  const tokens = lex(doc)
  if (typeof tokens === "string") return { ok: false, why: `the GraphQL document does not parse: ${tokens}` }
  const operations: Array<{ type: "query" | "mutation" | "subscription"; name: string | undefined }> = []
  let i = 0
  while (i < tokens.length) {
    const t = tokens[i] as Token
    let type: "query" | "mutation" | "subscription" | "fragment"
    let name: string | undefined
    if (t.kind === "punct" && t.text === "{") {
      type = "query"
    } else if (t.kind === "name" && (OPERATION_TYPES.has(t.text) || t.text === "fragment")) {
      type = t.text as typeof type
      const next = tokens[i + 1]
      if (next?.kind === "name") name = next.text
    } else {
      return { ok: false, why: "the GraphQL document has something other than operations and fragments at its top level" }
    }
    // The definition runs to the end of its selection set: its first "{" outside parentheses (a variable's
    // default or a directive's argument can be an object), to the matching "}".
    let j = i
    for (let parens = 0; j < tokens.length; j++) {
      const k = tokens[j] as Token
      if (k.kind !== "punct") continue
      if (k.text === "(") parens++
      else if (k.text === ")") parens--
      else if (k.text === "{" && parens === 0) break
    }
    let depth = 0
    for (; j < tokens.length; j++) {
      const k = tokens[j] as Token
      if (k.kind === "punct" && k.text === "{") depth++
      else if (k.kind === "punct" && k.text === "}" && --depth === 0) break
    }
    if (depth !== 0 || j >= tokens.length) return { ok: false, why: "the GraphQL document does not parse: its braces do not close" }
    if (type !== "fragment") operations.push({ type, name })
    i = j + 1
  }
  if (operations.length !== 1) {
    return { ok: false, why: operations.length === 0 ? "the GraphQL document has no operation" : `the GraphQL document has ${operations.length} operations (the gateway decides one)` }
  }
  const [op] = operations
  return { ok: true, type: op?.type ?? "query", name: op?.name }
}
