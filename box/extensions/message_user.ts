// roster box extension: message_user — deliver a message to the person who started this run.
// It goes to roster's gateway, authenticated by the run's own token; the gateway takes the run
// and task from the token, never from this request. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import * as http from "node:http"

const gateway = () => {
  const proxy = new URL(process.env.HTTP_PROXY ?? process.env.http_proxy ?? "http://invalid")
  return { host: proxy.hostname, port: Number(proxy.port || 80), token: decodeURIComponent(proxy.username) }
}

const post = (text: string, signal: AbortSignal | undefined) =>
  new Promise<string>((resolve, reject) => {
    const { host, port, token } = gateway()
    const body = JSON.stringify({ text })
    const req = http.request({
      host, port, method: "POST", path: "/v1/actions/message_user", signal,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${token}` }
    }, (res) => {
      let answer = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (answer += c))
      res.on("end", () => (res.statusCode === 200 ? resolve(answer) : reject(new Error(`gateway answered ${res.statusCode}: ${answer.trim()}`))))
    })
    req.on("error", reject)
    req.end(body)
  })

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "message_user",
    label: "Message user",
    description:
      "Send a short message to the person who started this run (they see it when the run ends, with its outputs). " +
      "Use it for what they must know: a result, a question, a problem. Plain text, at most 8000 characters.",
    parameters: Type.Object({
      text: Type.String({ description: "the message, plain text" })
    }),
    async execute(_toolCallId, params, signal) {
      await post(params.text, signal)
      return { content: [{ type: "text", text: "delivered" }], details: {} }
    }
  })
}
