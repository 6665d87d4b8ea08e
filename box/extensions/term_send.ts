// roster box extension: term_send — say something to the person at the terminal (roster talk, or
// the web's Talk page) now, between turns: shown at once as "<worker>: …" and kept in the run's
// messages. Registered only in a talk session's box (ROSTER_TERM_SEND=1); the gateway takes the
// run from the token and refuses it from any other kind of run. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { registerSayTool } from "./lib/sayTool.ts"

export default function (pi: ExtensionAPI) {
  if (process.env.ROSTER_TERM_SEND !== "1") return
  registerSayTool(pi, {
    name: "term_send",
    label: "Terminal send",
    description:
      "Say something to the person you are talking with at their terminal, now — a result, a question, where you are. " +
      "Your final answer is shown to them anyway; use this for what they should see before it. Plain text, at most 8000 characters.",
    text: "what to say, plain text",
    action: "term_send",
    done: "shown"
  })
}
