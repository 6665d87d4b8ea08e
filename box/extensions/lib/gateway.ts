// What roster's box extensions share: a POST to one of the gateway's box actions, authenticated by
// the run's own token (the proxy URL's user). The gateway takes the worker, run and task from that
// token, never from the request. Not an extension itself: run-pi loads extensions/*.ts only.
import * as http from "node:http"

const gateway = () => {
  const proxy = new URL(process.env.HTTP_PROXY ?? process.env.http_proxy ?? "http://invalid")
  return { host: proxy.hostname, port: Number(proxy.port || 80), token: decodeURIComponent(proxy.username) }
}

/** POST /v1/actions/<action> with a JSON body; the answer's text on 200, else an error naming the status. */
export const postAction = (action: string, payload: unknown, signal: AbortSignal | undefined) =>
  new Promise<string>((resolve, reject) => {
    const { host, port, token } = gateway()
    const body = JSON.stringify(payload)
    const req = http.request({
      // Its own agent: the box sets NODE_USE_ENV_PROXY, and the global agent would hand this to the
      // proxy (the gateway itself) as a request to forward instead of asking the gateway directly.
      host, port, method: "POST", path: `/v1/actions/${action}`, signal, agent: new http.Agent(),
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
