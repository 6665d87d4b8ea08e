// A box tool that says one piece of text through a gateway action (message_user, term_send, a chat
// send): the same parameters, the same post, an answer of one word. Not an extension itself:
// run-pi loads extensions/*.ts only.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./gateway.ts"

export interface SayTool {
  readonly name: string
  readonly label: string
  readonly description: string
  /** What the text parameter is, as the model reads it. */
  readonly text: string
  /** The gateway action it posts to. */
  readonly action: string
  /** The tool's answer once the gateway took it. */
  readonly done: string
  /** What the optional files parameter is, as the model reads it; absent: the tool takes text only. */
  readonly files?: string
}

export const registerSayTool = (pi: ExtensionAPI, tool: SayTool) =>
  pi.registerTool({
    name: tool.name,
    label: tool.label,
    description: tool.description,
    parameters: Type.Object({
      text: Type.String({ description: tool.text }),
      ...(tool.files ? { files: Type.Optional(Type.Array(Type.String(), { description: tool.files, maxItems: 10 })) } : {})
    }),
    async execute(_toolCallId, params, signal) {
      const files = (params as { readonly files?: ReadonlyArray<string> }).files
      await postAction(tool.action, { text: params.text, ...(files && files.length > 0 ? { files } : {}) }, signal)
      return { content: [{ type: "text", text: tool.done }], details: {} }
    }
  })
