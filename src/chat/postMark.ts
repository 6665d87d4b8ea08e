/**
 * What makes a post findable again: an answer posted by a delivery carries its mark, so a
 * daemon that died while the post was in flight looks for it in the place before posting again
 * (each part by its index), and an answer is posted once.
 */
export interface PostMark {
  /** The delivery's own mark (per task): at most 22 characters, so a part's Discord nonce stays within 25. */
  readonly id: string
  /** When the delivery began (ISO): the search looks no further back than shortly before it. */
  readonly since: string
  /** The delivery was cut by a crash: look for its parts before posting any. */
  readonly resume: boolean
}

/** Slack's message metadata event type of a delivery's parts. */
export const MARK_EVENT = "roster_delivery"

/** A part's Discord nonce (at most 25 characters; Discord refuses a second message with it for a while). */
export const partNonce = (mark: PostMark, part: number) => `${mark.id}.${part}`.slice(0, 25)

/** How far before the delivery's start a search looks (the clocks of roster and the service differ a little). */
export const SEARCH_SLACK_MS = 120_000
