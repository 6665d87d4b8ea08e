/**
 * HTML built only through `html`: every interpolated value is escaped, so text from a box (an
 * assistant's answer, a tool's output, a task prompt) is always text, never markup. A fragment
 * that is itself built with `html` passes through as it is.
 */
export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)

type Part = Html | string | number | boolean | null | undefined | ReadonlyArray<Part>

const render = (v: Part): string =>
  v instanceof Html ? v.text : Array.isArray(v) ? v.map(render).join("") : v === null || v === undefined || v === false ? "" : escapeHtml(String(v))

export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Part>) =>
  new Html(strings.reduce((out, s, i) => out + s + (i < values.length ? render(values[i] as Part) : ""), ""))

/** A box's text cut to `max` characters, saying so: a page never carries a 200 MB tool output. */
export const cut = (text: string, max = 2_000) => (text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`)
