import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { type HostFiles, Paths } from "../config/Paths.js"
import type { ChatRule } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import { type ChatTokens, chatTokens } from "../vault/chatTokens.js"
import { Vault } from "../vault/Vault.js"
import { answerPress } from "./approvalCard.js"
import type { CardPress } from "./cardPress.js"
import type { ChatPostError } from "./ChatPostError.js"
import type { MessageFile } from "../contract/messageFile.js"
import { fetchChatFile } from "./fetchFile.js"
import { markMessage, type TurnMark, typingIn } from "./marks.js"
import { type PastBound, type PastLine, placePast } from "./placePast.js"
import { postChat } from "./postChat.js"

/**
 * The chat services as the daemon's hub speaks to them: each call finds its connection in
 * org.toml and its tokens in the vault, and needs nothing of its caller (R = never). Its layer is
 * the one place that holds what those reads go through, so the hub holds no captured context.
 */
export class ChatClients extends Context.Tag("roster/ChatClients")<ChatClients, {
  /** Posts `text` in a thread, split to the service's message size; the ids of what was posted. */
  readonly post: (place: ChatPlace, text: string) => Effect.Effect<ReadonlyArray<string>, ChatPostError>
  /** What was said in a place before `before`, within `bound`. */
  readonly past: (place: ChatPlace, before: string, bound: PastBound) => Effect.Effect<ReadonlyArray<PastLine>, ChatPostError>
  /** A message's turn mark (a reaction), replacing `replaces`. */
  readonly mark: (place: ChatPlace, messageId: string, mark: TurnMark, replaces?: TurnMark) => Effect.Effect<void, ChatPostError>
  /** Discord's typing indicator, once (it lasts ten seconds). */
  readonly typing: (place: ChatPlace) => Effect.Effect<void, ChatPostError>
  /** Answers a button press on an approval card (only the presser sees `text`). */
  readonly answerPress: (place: ChatPlace, press: CardPress, text?: string) => Effect.Effect<void, ChatPostError>
  /** A connection's tokens, or why there are none (the fix named). */
  readonly tokens: (provider: ChatRule["provider"], connection: string) => Effect.Effect<ChatTokens, string>
  /** Fetches a message's file to `dest` with the connection's token (the box never holds it); the bytes written. */
  readonly fetchFile: (chat: ChatRule, file: MessageFile, dest: string, maxBytes: number) => Effect.Effect<number, { readonly message: string }>
}>() {
  static readonly layer = Layer.effect(
    ChatClients,
    Effect.gen(function*() {
      // Only the named services: a layer's whole context carries its own Scope along.
      const env = Context.pick(OrgConfig, Vault, Paths, FileSystem.FileSystem, Path.Path)(yield* Effect.context<OrgConfig | Vault | HostFiles>())
      const own = <A, E>(effect: Effect.Effect<A, E, OrgConfig | Vault | HostFiles>) => Effect.provide(effect, env)
      const tokens = (provider: ChatRule["provider"], connection: string) => own(chatTokens(provider, connection))
      return {
        post: (place, text) => own(postChat(place, text)),
        past: (place, before, bound) => own(placePast(place, before, bound)),
        mark: (place, messageId, mark, replaces) => own(markMessage(place, messageId, mark, replaces)),
        typing: (place) => own(typingIn(place)),
        answerPress: (place, press, text) => own(answerPress(place, press, text)),
        tokens,
        fetchFile: (chat, file, dest, maxBytes) =>
          own(fetchChatFile(chat, tokens(chat.provider, chat.connection).pipe(Effect.map((t) => t.bot_token)))(file, dest, maxBytes))
      }
    })
  )

  /** A chat service that keeps what is posted in `posted` (in order) and has no past, no tokens and no files. */
  static readonly layerTest = (posted: Array<{ readonly place: ChatPlace; readonly text: string }>) =>
    Layer.succeed(ChatClients, {
      post: (place, text) => Effect.sync(() => [String(posted.push({ place, text }))]),
      past: () => Effect.succeed([]),
      mark: () => Effect.void,
      typing: () => Effect.void,
      answerPress: () => Effect.void,
      tokens: (_provider, connection) => Effect.fail(`there is no connection "${connection}" in the test's chat service`),
      fetchFile: () => Effect.fail({ message: "the test's chat service holds no files" })
    })
}
