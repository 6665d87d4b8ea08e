// roster box extension: slack_send / discord_send — post this chat session's answer to its channel,
// in the thread of the message being answered. Registered only in a chat session's box, as the
// tool of that session's service (ROSTER_CHAT_SEND=slack or discord); the gateway takes the channel
// and thread from the run, never from this request, and posts with a token no box ever holds.
// Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { registerSayTool } from "./lib/sayTool.ts"

const SERVICES = { slack: "Slack", discord: "Discord" } as const

export default function (pi: ExtensionAPI) {
  const provider = process.env.ROSTER_CHAT_SEND
  if (provider !== "slack" && provider !== "discord") return
  const service = SERVICES[provider]
  registerSayTool(pi, {
    name: `${provider}_send`,
    label: `${service} send`,
    description:
      `Post a message to the ${service} conversation you are in (the thread of the message you are answering). ` +
      "This is the only way the people there see what you say: text you write without it is not delivered. " +
      `Text and code blocks; a long message is split for ${service}. At most 12000 characters. ` +
      "To hand back files (a patch, a log, a chart), name them in files: paths under /pihome, at most 10, each at most the chat's file size limit.",
    text: `the message, as ${service} should show it`,
    action: `${provider}_send`,
    done: "posted",
    files: "files to attach after the text, as paths in this box under /pihome (e.g. /pihome/workspace/report.md); the run's own folders only"
  })
}
