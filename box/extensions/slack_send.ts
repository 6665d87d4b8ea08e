// roster box extension: slack_send — post this chat session's answer to its Slack channel, in the
// thread of the message being answered. Registered only in a Slack chat session's box
// (ROSTER_CHAT_SEND=slack); the gateway takes the channel and thread from the run, never from
// this request, and posts with a token no box ever holds. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./lib/gateway.ts"

export default function (pi: ExtensionAPI) {
  if (process.env.ROSTER_CHAT_SEND !== "slack") return
  pi.registerTool({
    name: "slack_send",
    label: "Slack send",
    description:
      "Post a message to the Slack conversation you are in (the thread of the message you are answering). " +
      "This is the only way the people there see what you say: text you write without it is not delivered. " +
      "Text and code blocks; a long message is split for Slack. At most 12000 characters.",
    parameters: Type.Object({
      text: Type.String({ description: "the message, as Slack should show it" })
    }),
    async execute(_toolCallId, params, signal) {
      await postAction("slack_send", { text: params.text }, signal)
      return { content: [{ type: "text", text: "posted" }], details: {} }
    }
  })
}
