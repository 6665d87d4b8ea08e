import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"

/**
 * A stand-in "outside host" that never leaves this machine: a network namespace with a veth
 * pair, a TEST-NET-2 address routed to it, and a TCP listener inside that greets each client.
 */
export interface OutsideHost {
  readonly address: string
  readonly port: number
  readonly httpPort: number
  /** HTTPS echo servers (with `tls`): the same app on two ports. */
  readonly httpsPorts: readonly [number, number]
  readonly greeting: string
  /** Every HTTP request (and WebSocket handshake) its servers have heard so far, in order. */
  readonly heard: () => ReadonlyArray<{ readonly method: string; readonly url: string; readonly host: string; readonly upgrade: string }>
  readonly close: () => void
}

const sh = (cmd: string, args: ReadonlyArray<string>) => execFileSync(cmd, [...args], { stdio: "pipe" }).toString()

// The upstream app: echoes what it received (headers included, so a leaked key would show),
// with a hash of the credential headers as proof of what arrived; /redirect and /sse for the
// proxy's redirect and streaming behaviour; /oauth/token a token endpoint that counts refreshes.
// WS_APP: a WebSocket upgrade on the same servers — the 101 reflects the key in a header, the
// first message is the handshake's headers, the second the key split over two fragments, and
// every message after is echoed; /ws-deflate accepts compression nobody offered.
const WS_APP = `
  const wsFrame = (fin, op, p) => {
    const b = Buffer.from(p);
    const h = b.length < 126 ? Buffer.from([(fin ? 0x80 : 0) | op, b.length]) : Buffer.from([(fin ? 0x80 : 0) | op, 126, b.length >> 8, b.length & 255]);
    return Buffer.concat([h, b]);
  };
  const wsApp = (q, s, head) => {
    console.log("HEARD " + JSON.stringify({ method: q.method, url: q.url, host: q.headers.host || "", upgrade: q.headers.upgrade || "" }));
    s.on("error", () => {});
    const accept = crypto.createHash("sha1").update(q.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    const k = String(q.headers["x-api-key"] || q.headers["authorization"] || "");
    s.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept +
      "\\r\\nX-Echo-Key: " + k + (q.url === "/ws-deflate" ? "\\r\\nSec-WebSocket-Extensions: permessage-deflate" : "") + "\\r\\n\\r\\n");
    s.write(wsFrame(true, 1, JSON.stringify({ greeting: GREETING, path: q.url, headers: q.headers, x_api_key_sha256: sha(q.headers["x-api-key"]) })));
    const half = Math.floor(k.length / 2);
    s.write(wsFrame(false, 1, "split:" + k.slice(0, half)));
    s.write(wsFrame(true, 0, k.slice(half)));
    let buf = head;
    s.on("data", (c) => {
      buf = Buffer.concat([buf, c]);
      for (;;) {
        if (buf.length < 2) return;
        let n = buf[1] & 127, at = 2;
        if (n === 126) { if (buf.length < 4) return; n = buf.readUInt16BE(2); at = 4; }
        if (buf.length < at + 4 + n) return;
        const m = buf.subarray(at, at + 4), op = buf[0] & 15;
        const p = Buffer.from(buf.subarray(at + 4, at + 4 + n)).map((x, i) => x ^ m[i & 3]);
        buf = buf.subarray(at + 4 + n);
        if (op === 8) return s.end(wsFrame(true, 8, p));
        s.write(wsFrame(true, op, p));
      }
    });
  };
`

const APP = `
  const crypto = require("crypto");
  const sha = (v) => v === undefined ? null : crypto.createHash("sha256").update(String(v)).digest("hex");
  let tokens = 0;
  const app = (q, r) => {
    // Every request it hears, on stdout for the test: what reached the upstream, whatever it was answered.
    console.log("HEARD " + JSON.stringify({ method: q.method, url: q.url, host: q.headers.host || "", upgrade: q.headers.upgrade || "" }));
    if (q.url === "/oauth/token") {
      let b = "";
      q.on("data", (c) => b += c);
      q.on("end", () => {
        const f = JSON.parse(b || "{}");
        if (f.grant_type !== "refresh_token" || f.refresh_token === "bad") { r.writeHead(400, { "content-type": "application/json" }); return r.end('{"error":"invalid_grant"}'); }
        tokens++;
        r.writeHead(200, { "content-type": "application/json" });
        r.end(JSON.stringify({ access_token: "REAL.oauth.access." + tokens, refresh_token: "REAL-refresh-" + (tokens + 1), expires_in: 3600 }));
      });
      return;
    }
    // A hostile reflector: the key it got, compressed whatever was asked (?as=gzip|br|deflate|deflate-raw|zstd|gzip,br, or an
    // unknown coding: "compress", LZW, which nobody undoes),
    // or spelled with only some characters encoded (/partial).
    if (q.url.startsWith("/encoded")) {
      const zlib = require("zlib");
      const as = new URL(q.url, "http://x").searchParams.get("as") || "gzip";
      let body = Buffer.from(JSON.stringify({ echoed: q.headers["x-api-key"], headers: q.headers }));
      for (const c of as.split(",")) {
        body = c === "gzip" ? zlib.gzipSync(body) : c === "br" ? zlib.brotliCompressSync(body) : c === "deflate" ? zlib.deflateSync(body)
          : c === "deflate-raw" ? zlib.deflateRawSync(body) : c === "zstd" ? zlib.zstdCompressSync(body) : Buffer.concat([Buffer.from([0x1f, 0x9d]), body]);
      }
      r.writeHead(200, { "content-type": "application/json", "content-encoding": as.replace("deflate-raw", "deflate") });
      return r.end(body);
    }
    if (q.url === "/partial") {
      const k = String(q.headers["x-api-key"] || "");
      const hex = (c, w) => c.charCodeAt(0).toString(16).padStart(w, "0");
      const raw = [
        k.replace(/-/g, "%2D"),
        k.replace(/-/g, (m, i) => (i % 2 ? "%2d" : "%2D")),
        k.replace(/-/g, "\\\\u002d"),
        [...k].map((c, i) => (i % 3 === 0 ? "%" + hex(c, 2) : i % 3 === 1 ? "\\\\u" + hex(c, 4).toUpperCase() : c)).join(""),
        k.replace(/-/g, "%252D")
      ];
      // Written as they are (not JSON-escaped again), plus one JSON-encoded: "\\\\u002d" on the wire.
      r.writeHead(200, { "content-type": "application/json", "x-reflected": raw[0] });
      return r.end('{"raw":["' + raw.join('","') + '"],"json":' + JSON.stringify(k.replace(/-/g, "\\\\u002d")) + "}");
    }
    if (q.url === "/redirect") { r.writeHead(302, { location: "https://elsewhere.test/next" }); return r.end(); }
    if (q.url === "/sse") {
      r.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let n = 0;
      const tick = () => { r.write("event: tick\\ndata: " + n + "\\n\\n"); if (++n < 3) setTimeout(tick, 500); else r.end(); };
      return tick();
    }
    let body = "";
    q.on("data", (c) => body += c);
    q.on("end", () => r.end(JSON.stringify({
      greeting: GREETING, method: q.method, path: q.url, headers: q.headers, body,
      x_api_key_sha256: sha(q.headers["x-api-key"]), authorization_sha256: sha(q.headers["authorization"])
    })));
  };
`

/** The outside host's namespace: one name, so that creating it is the claim (`ip netns add` refuses one that exists). */
const OUTSIDE_NS = "roster-t-outside"

/** How long a namespace may stand without its listener (being set up) before it is taken for a killed run's. */
const SETUP_GRACE_MS = 30_000

/** How long a run waits for another's outside host to go before it fails saying so. */
const OUTSIDE_WAIT_MS = 540_000

const tryNetns = (args: ReadonlyArray<string>) => {
  try {
    sh("ip", ["netns", ...args])
    return true
  } catch {
    return false
  }
}

/**
 * True when the outside host's namespace was left by a killed test run: no process in it, and
 * older than a setup takes (a run that just made it starts its listener within a second).
 */
const leftByKilledRun = () => {
  try {
    if (sh("ip", ["netns", "pids", OUTSIDE_NS]).trim() !== "") return false
    return Date.now() - fs.statSync(`/var/run/netns/${OUTSIDE_NS}`).mtimeMs > SETUP_GRACE_MS
  } catch {
    return false
  }
}

/** Namespaces of the per-run names earlier versions used, left by a killed run (their veth goes with them). */
const removeOldStyleHosts = () => {
  for (const line of sh("ip", ["netns", "list"]).split("\n")) {
    const ns = /^(roster-t-[0-9a-f]{6})\b/.exec(line)?.[1]
    if (ns && sh("ip", ["netns", "pids", ns]).trim() === "") tryNetns(["del", ns])
  }
}

/**
 * One outside host on the machine at a time: each is the same TEST-NET-2 address, and two would
 * route this run's connections to the other's listener (a 502, a wrong greeting, for no reason
 * the test could name). The namespace is claimed by creating it — atomic, so two suites on the
 * machine (a checkout's tests beside CI's) can never both hold it; the second waits.
 */
const claimOutsideNamespace = async () => {
  removeOldStyleHosts()
  const deadline = Date.now() + OUTSIDE_WAIT_MS
  let said = false
  while (!tryNetns(["add", OUTSIDE_NS])) {
    if (leftByKilledRun()) {
      tryNetns(["del", OUTSIDE_NS])
      continue
    }
    if (Date.now() > deadline) {
      throw new Error(`another test run's outside host (${OUTSIDE_NS}) is still up after ${OUTSIDE_WAIT_MS / 1000} s: ` +
        `two suites on one machine share its TEST-NET address — run them one after another (ip netns pids ${OUTSIDE_NS} shows whose it is)`)
    }
    if (!said) console.warn(`waiting for another test run's outside host (${OUTSIDE_NS}) to close: they share one TEST-NET address`)
    said = true
    await new Promise((r) => setTimeout(r, 500))
  }
}

export const makeOutsideHost = async (tlsFiles?: { readonly cert: string; readonly key: string }): Promise<OutsideHost> => {
  await claimOutsideNamespace()
  const id = crypto.randomBytes(3).toString("hex")
  const ns = OUTSIDE_NS
  const hostIf = `rth${id}`
  const nsIf = `rtn${id}`
  const address = "198.51.100.7"
  const port = 9099
  const httpPort = 9080
  const greeting = `hello-from-outside-${id}`
  let listener: ChildProcess | undefined
  const heard: Array<{ readonly method: string; readonly url: string; readonly host: string; readonly upgrade: string }> = []
  const close = () => {
    listener?.kill("SIGKILL")
    tryNetns(["del", ns])
    // Gone with the namespace once its peer was moved in; a setup that failed before may leave it.
    try {
      sh("ip", ["link", "del", hostIf])
    } catch {
      // removed with the namespace
    }
  }
  try {
    sh("ip", ["link", "add", hostIf, "type", "veth", "peer", "name", nsIf])
    sh("ip", ["link", "set", nsIf, "netns", ns])
    sh("ip", ["addr", "add", "198.51.100.1/24", "dev", hostIf])
    sh("ip", ["link", "set", hostIf, "up"])
    sh("ip", ["netns", "exec", ns, "ip", "addr", "add", `${address}/24`, "dev", nsIf])
    sh("ip", ["netns", "exec", ns, "ip", "link", "set", nsIf, "up"])
    sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"])
    const program = `
      const net = require("net"), http = require("http"), https = require("https"), fs = require("fs");
      const GREETING = ${JSON.stringify(greeting)};
      ${APP}
      ${WS_APP}
      net.createServer((s) => { s.on("error", () => {}); s.end(${JSON.stringify(`${greeting}\n`)}) }).listen(${port}, ${JSON.stringify(address)});
      ${tlsFiles ? `
      const opts = { cert: fs.readFileSync(${JSON.stringify(tlsFiles.cert)}), key: fs.readFileSync(${JSON.stringify(tlsFiles.key)}) };
      https.createServer(opts, app).on("upgrade", wsApp).listen(8443, ${JSON.stringify(address)});
      https.createServer(opts, app).on("upgrade", wsApp).listen(9443, ${JSON.stringify(address)});` : ""}
      http.createServer(app).listen(${httpPort}, ${JSON.stringify(address)}, () => setTimeout(() => console.log("ready"), 100));
    `
    listener = spawn("ip", ["netns", "exec", ns, process.execPath, "-e", program], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    listener.stdout?.on("data", (c: Buffer) => {
      out += c.toString()
      for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
        const line = out.slice(0, nl)
        out = out.slice(nl + 1)
        if (line.startsWith("HEARD ")) heard.push(JSON.parse(line.slice(6)) as (typeof heard)[number])
      }
    })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the outside host's listener did not start")), 10_000)
      listener?.stdout?.once("data", () => {
        clearTimeout(timer)
        resolve()
      })
      listener?.once("exit", (code) => reject(new Error(`the outside host's listener exited (${code})`)))
    })
  } catch (e) {
    close()
    throw e
  }
  return { address, port, httpPort, httpsPorts: [8443, 9443], greeting, heard: () => [...heard], close }
}
