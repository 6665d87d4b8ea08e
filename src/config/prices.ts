import type { PriceRule } from "./schema.js"

/**
 * The prices roster ships, in USD per million tokens, as Anthropic listed them on this date.
 * Prices change: a `[[price]]` in org.toml wins over these, model by model. A model neither
 * lists is priced as the dearest here, so a budget errs towards stopping early.
 */
export const PRICES_AS_OF = "2025-11-24"

export const DEFAULT_PRICES: ReadonlyArray<PriceRule> = [
  { model: "claude-opus-4-5*", input: 5, output: 25, cache_write: 6.25, cache_read: 0.5 },
  { model: "claude-opus-4*", input: 15, output: 75, cache_write: 18.75, cache_read: 1.5 },
  { model: "claude-sonnet-4*", input: 3, output: 15, cache_write: 3.75, cache_read: 0.3 },
  { model: "claude-haiku-4-5*", input: 1, output: 5, cache_write: 1.25, cache_read: 0.1 },
  { model: "claude-3-7-sonnet*", input: 3, output: 15, cache_write: 3.75, cache_read: 0.3 },
  { model: "claude-3-5-haiku*", input: 0.8, output: 4, cache_write: 1, cache_read: 0.08 },
  { model: "claude-3-opus*", input: 15, output: 75, cache_write: 18.75, cache_read: 1.5 },
  { model: "claude-3-haiku*", input: 0.25, output: 1.25, cache_write: 0.3, cache_read: 0.03 }
]

const DEAREST: PriceRule = { model: "*", input: 15, output: 75, cache_write: 18.75, cache_read: 1.5 }

const matches = (pattern: string, model: string) =>
  pattern.endsWith("*") ? model.startsWith(pattern.slice(0, -1)) : pattern === model

/** The price of `model`: org.toml's [[price]] first (in order), then the shipped table; `known` is false for the fallback. */
export const priceFor = (configured: ReadonlyArray<PriceRule>, model: string): { readonly price: PriceRule; readonly known: boolean } => {
  const found = configured.find((p) => matches(p.model, model)) ?? DEFAULT_PRICES.find((p) => matches(p.model, model))
  return found ? { price: found, known: true } : { price: DEAREST, known: false }
}

/** Token counts of one answer (or a sum of them). */
export interface TokenCount {
  readonly input: number
  readonly output: number
  readonly cache_read: number
  readonly cache_write: number
}

export const NO_TOKENS: TokenCount = { input: 0, output: 0, cache_read: 0, cache_write: 0 }

export const addTokens = (a: TokenCount, b: TokenCount): TokenCount => ({
  input: a.input + b.input, output: a.output + b.output, cache_read: a.cache_read + b.cache_read, cache_write: a.cache_write + b.cache_write
})

export const totalTokens = (t: TokenCount) => t.input + t.output + t.cache_read + t.cache_write

/** USD for `t` at `p` (cache tokens at the input price when the rule does not name one). */
export const costOf = (p: PriceRule, t: TokenCount) =>
  (t.input * p.input + t.output * p.output + t.cache_read * (p.cache_read ?? p.input) + t.cache_write * (p.cache_write ?? p.input)) / 1_000_000
