// roster box extension: message_user — deliver a message to the person who started this run.
// It goes to roster's gateway, authenticated by the run's own token; the gateway takes the run
// and task from the token, never from this request. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { registerSayTool } from "./lib/sayTool.ts"

export default function (pi: ExtensionAPI) {
  // In a chat session (ROSTER_CHAT_SEND set) the gateway posts it to the thread the session serves.
  const inChat = process.env.ROSTER_CHAT_SEND === "slack" || process.env.ROSTER_CHAT_SEND === "discord"
  registerSayTool(pi, {
    name: "message_user",
    label: "Message user",
    description: (inChat
      ? "Send a short message to the people in the conversation you are in (it is posted in the thread at once). "
      : "Send a short message to the person who started this run (they see it when the run ends, with its outputs). ") +
      "Use it for what they must know: a result, a question, a problem. Plain text, at most 8000 characters.",
    text: "the message, plain text",
    action: "message_user",
    done: "delivered"
  })
}
