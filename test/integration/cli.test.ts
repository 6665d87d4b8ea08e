import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { collect, type Result, ROSTER_BIN } from "../support/deployment.js"
import { execFileSync, spawn, spawnSync } from "node:child_process"

const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-cli-"))
const roster = (...args: Array<string>) =>
  collect(spawn(ROSTER_BIN, [...args], { env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: "80" }, stdio: ["ignore", "pipe", "pipe"] }))

/** `f` of every item, at most four at once (each a CLI process: the machine's cores, not one at a time), in the items' order. */
const inPool = async <A, B>(items: ReadonlyArray<A>, f: (a: A) => Promise<B>): Promise<Array<B>> => {
  const out = new Array<B>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await f(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: 4 }, worker))
  return out
}

describe("the roster CLI (the real binary, a temp ROSTER_HOME)", () => {
  it("init makes the roots, a commented org.toml and a first worker, and never overwrites", async () => {
    const first = await roster("init")
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain("created  ")
    const toml = fs.readFileSync(path.join(home, "config", "org.toml"), "utf8")
    expect(toml).toContain(`egress_lockdown = ${process.getuid?.() === 0 ? "true" : "false"}`)
    expect(fs.statSync(path.join(home, "data", "vault")).mode & 0o777).toBe(0o700)
    fs.appendFileSync(path.join(home, "config", "org.toml"), "# mine\n")
    const again = await roster("init")
    expect(again.stdout).toContain("kept     ")
    expect(fs.readFileSync(path.join(home, "config", "org.toml"), "utf8")).toContain("# mine")
  })

  it("worker add | list | show", async () => {
    expect((await roster("worker", "add", "bob")).code).toBe(0)
    const dup = await roster("worker", "add", "bob")
    expect(dup.code).toBe(1)
    expect(dup.stderr).toContain("already exists")
    const bad = await roster("worker", "add", "Bob!")
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("is not a worker name")
    expect(fs.existsSync(path.join(home, "config", "workers", "Bob!"))).toBe(false)
    expect(JSON.parse((await roster("worker", "list", "--json")).stdout)).toEqual(["alice", "bob"])
    const show = JSON.parse((await roster("worker", "show", "bob", "--json")).stdout)
    expect(show).toMatchObject({ worker: "bob", settings: { store: { snapshots: 5 } }, recent_runs: [] })
    expect(show.identity).toContain("You are bob")
  })

  it("worker edit: the editor's change is checked, then saved and shown; an empty, oversized or NUL identity changes nothing and keeps the draft; a run of a hand-broken identity is refused with the fix", async () => {
    const file = path.join(home, "config", "workers", "bob", "identity.md")
    const editor = (script: string) => {
      const f = path.join(home, `editor-${Math.random().toString(36).slice(2)}.sh`)
      fs.writeFileSync(f, `#!/bin/sh\n${script}\n`, { mode: 0o755 })
      return f
    }
    const withEditor = (e: string, ...args: Array<string>) =>
      collect(spawn(ROSTER_BIN, args, { env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: "80", EDITOR: e, VISUAL: "" }, stdio: ["ignore", "pipe", "pipe"] }))
    const saved = await withEditor(editor(`printf 'You are bob, the release checker.\\nYou read changelogs.\\n' > "$1"`), "worker", "edit", "bob")
    expect(saved.code, saved.stderr).toBe(0)
    expect(saved.stdout).toContain("bob's identity saved; the next run of bob starts from it:")
    expect(saved.stdout).toContain("identity (2 lines, 55 characters;")
    expect(saved.stdout).toContain("  You are bob, the release checker.")
    expect(fs.readFileSync(file, "utf8")).toBe("You are bob, the release checker.\nYou read changelogs.\n")
    // An empty edit: refused, the identity as it was, the draft kept to fix.
    const emptied = await withEditor(editor(`: > "$1"`), "worker", "edit", "bob")
    expect(emptied.code).toBe(1)
    expect(emptied.stderr).toContain("that cannot be bob's identity: it is empty")
    expect(emptied.stderr).toContain(`your draft is kept in ${file}.edit`)
    expect(fs.readFileSync(file, "utf8")).toBe("You are bob, the release checker.\nYou read changelogs.\n")
    // From a file: a NUL, and one over [box] identity_max, are refused naming why.
    const nul = path.join(home, "nul.md")
    fs.writeFileSync(nul, "You are bob\u0000 with a NUL")
    const refused = await roster("worker", "edit", "bob", "--identity-file", nul)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("it holds a NUL character (at character 12)")
    const big = path.join(home, "big.md")
    fs.writeFileSync(big, "x".repeat(70_000))
    expect((await roster("worker", "edit", "bob", "--identity-file", big)).stderr).toContain("it is 70000 characters, over [box] identity_max (64000)")
    expect(fs.readFileSync(file, "utf8")).toBe("You are bob, the release checker.\nYou read changelogs.\n")
    // worker show: the first lines and the size, not the whole file.
    const shown = await roster("worker", "show", "bob")
    expect(shown.stdout).toContain(`identity (2 lines, 55 characters; ${file}):\n  You are bob, the release checker.\n  You read changelogs.\n`)
    // Broken by hand: no run starts from it, and the error says how to fix it.
    fs.writeFileSync(file, "   \n")
    const run = await roster("worker", "run", "bob", "hello")
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(`bob's identity (${file}) cannot start a run: it is empty`)
    expect(run.stderr).toContain("fix it: roster worker edit bob")
    fs.writeFileSync(file, "You are bob.\n")
  })

  it("connection login anthropic: the PKCE sign-in pi's /login performs, against a token-endpoint stand-in that checks the verifier against the printed URL's challenge; the login lands in the vault (0600), listed as oauth with its end", async () => {
    // A stand-in for Anthropic's token endpoint (not the service): it answers the exchange only for the verifier whose S256 challenge was printed.
    const seen: Array<Record<string, string>> = []
    let challenge = ""
    const server = http.createServer((req, res) => {
      let body = ""
      req.on("data", (c: Buffer) => (body += c.toString()))
      req.on("end", () => {
        const got = JSON.parse(body) as Record<string, string>
        seen.push(got)
        const ok = got.grant_type === "authorization_code" && got.code === "CODE-FROM-ANTHROPIC" && got.client_id === "9d1c250a-e61b-44d9-88ed-5944d1962f5e" &&
          got.redirect_uri === "https://platform.claude.com/oauth/code/callback" &&
          crypto.createHash("sha256").update(got.code_verifier ?? "").digest("base64url") === challenge
        res.writeHead(ok ? 200 : 400, { "content-type": "application/json" })
        res.end(ok ? JSON.stringify({ access_token: "sk-ant-oat-ACCESS-1", refresh_token: "sk-ant-ort-REFRESH-1", expires_in: 28_800 }) : JSON.stringify({ error: "invalid_grant" }))
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const tokenUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/v1/oauth/token`
    try {
      const child = spawn(ROSTER_BIN, ["connection", "login", "anthropic", "--token-url", tokenUrl], {
        env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: "80" }, stdio: ["pipe", "pipe", "pipe"]
      })
      let out = ""
      const url = await new Promise<URL>((resolve) => {
        child.stdout.on("data", (c: Buffer) => {
          out += c.toString()
          const m = /(https:\/\/claude\.ai\/oauth\/authorize\?\S+)/.exec(out)
          if (m) resolve(new URL(m[1]!))
        })
      })
      expect(url.searchParams.get("code_challenge_method")).toBe("S256")
      expect(url.searchParams.get("client_id")).toBe("9d1c250a-e61b-44d9-88ed-5944d1962f5e")
      challenge = url.searchParams.get("code_challenge") ?? ""
      // The person pastes what Anthropic shows: code#state.
      child.stdin.end(`CODE-FROM-ANTHROPIC#${url.searchParams.get("state")}\n`)
      const done = await collect(child)
      expect(done.code, done.stderr).toBe(0)
      expect(out + done.stdout).toContain(`signed in: stored connection "anthropic" (oauth) in the vault`)
      expect(seen).toHaveLength(1)
      const file = path.join(home, "data", "vault", "anthropic.json")
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      expect(JSON.parse(fs.readFileSync(file, "utf8"))).toMatchObject({ type: "oauth", access: "sk-ant-oat-ACCESS-1", refresh: "sk-ant-ort-REFRESH-1", token_url: tokenUrl })
      const listed = await roster("connection", "list")
      expect(listed.stdout).toMatch(/^anthropic\s+oauth\s+bearer\s+\S+\s+expires \d{4}-/m)
      expect((await roster("doctor", "--json")).stdout).toContain(`"name": "anthropic"`)
      // A code of another sign-in (its state not ours) is refused, and nothing changes.
      const other = spawn(ROSTER_BIN, ["connection", "login", "anthropic", "--token-url", tokenUrl], { env: { ...process.env, ROSTER_HOME: home, HOME: home }, stdio: ["pipe", "pipe", "pipe"] })
      other.stdin.end("CODE-FROM-ANTHROPIC#not-this-sign-in\n")
      const refused = await collect(other)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("that code is from another sign-in")
      expect(seen).toHaveLength(1)
      // A bare code carries no state: it could be any sign-in's, so it is refused with what to paste.
      const bare = spawn(ROSTER_BIN, ["connection", "login", "anthropic", "--token-url", tokenUrl], { env: { ...process.env, ROSTER_HOME: home, HOME: home }, stdio: ["pipe", "pipe", "pipe"] })
      bare.stdin.end("CODE-FROM-ANTHROPIC\n")
      const bareRefused = await collect(bare)
      expect(bareRefused.code).toBe(1)
      expect(bareRefused.stderr).toContain("a code without its state")
      expect(bareRefused.stderr).toContain("code#state")
      expect(seen).toHaveLength(1)
      // The sign-in URL went to the person only: its state (the PKCE verifier) is in no file roster keeps.
      const kept = (fs.readdirSync(home, { recursive: true }) as Array<string>).map((f) => path.join(home, f))
        .filter((f) => fs.statSync(f).isFile()).map((f) => fs.readFileSync(f, "latin1")).join("\n")
      expect(kept).not.toContain(url.searchParams.get("state") ?? "-")
      // Codex is pi's own sign-in: roster says what works instead.
      const codex = await roster("connection", "login", "openai-codex")
      expect(codex.code).toBe(1)
      expect(codex.stderr).toContain("roster connection add openai-codex --from-pi-login")
    } finally {
      server.close()
      await roster("connection", "rm", "anthropic")
    }
  })

  it("connection add --from-pi-login: the host pi's logins (auth.json as pi 1.6 writes it) into the vault, every field kept; a missing one says what the file has", async () => {
    const authFile = path.join(home, "pi-auth.json")
    // pi-ai's Credential: { type: "oauth", refresh, access, expires, ...provider fields } | { type: "api_key", key }.
    fs.writeFileSync(authFile, JSON.stringify({
      anthropic: { type: "oauth", refresh: "sk-ant-ort-PI", access: "sk-ant-oat-PI", expires: Date.now() + 3_600_000 },
      "openai-codex": { type: "oauth", refresh: "rt-codex", access: "eyJ.codex.jwt", expires: Date.now() - 1000, accountId: "acct-123" }
    }), { mode: 0o600 })
    for (const name of ["anthropic", "openai-codex"]) {
      const r = await roster("connection", "add", name, "--from-pi-login", authFile)
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout).toContain(`stored connection "${name}" (oauth) from ${authFile}`)
    }
    expect(JSON.parse(fs.readFileSync(path.join(home, "data", "vault", "openai-codex.json"), "utf8"))).toMatchObject({ type: "oauth", access: "eyJ.codex.jwt", accountId: "acct-123", imported_from: authFile })
    expect((await roster("connection", "list")).stdout).toMatch(/^openai-codex\s+oauth\s+bearer\s+\S+\s+expired \d{4}-/m)
    const missing = await roster("connection", "add", "github", "--from-pi-login", authFile)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain(`has no login for "github" (it has: anthropic, openai-codex)`)
    // A Codex "key" is nothing pi can use: refused with the way that works.
    expect((await roster("connection", "add", "openai-codex", "--from-env", "HOME")).stderr).toContain("--from-pi-login")
    for (const name of ["anthropic", "openai-codex"]) await roster("connection", "rm", name)
  })

  it("refuses a run before anything is written when the prompt is blank or the ceiling is nonsense", async () => {
    for (const args of [["alice", "  "], ["alice", "--ceiling", "-3", "x"], ["alice", "--ceiling", "0", "x"], ["nobody", "x"]]) {
      const r = await roster("worker", "run", ...args)
      expect(r.code, args.join(" ")).toBe(1)
      expect(r.stderr.length).toBeGreaterThan(0)
    }
    expect(fs.existsSync(path.join(home, "data", "runs"))).toBe(false)
    expect(JSON.parse((await roster("runs", "list", "--json")).stdout)).toEqual([])
  })

  it("a time out of bounds is refused with the bound, never a crash: --at, --ceiling, --retries (no daemon: the CLI queues itself)", async () => {
    for (const [args, said] of [
      [["--at", "+99999999999999d"], "at most 365 days ahead"],
      [["--at", "+400d"], "at most 365 days ahead"],
      [["--at", "99999-01-01T00:00:00Z"], "a time (2026-12-24T09:00:00Z) or a span from now"],
      [["--ceiling", "1e300"], "at most 20160 (14 days)"],
      [["--ceiling", "20161"], "at most 20160 (14 days)"],
      [["--retries", "999999999"], "a whole number from 0 to 20"]
    ] as const) {
      const r = await roster("task", "add", "alice", ...args, "x")
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(1)
      expect(r.stderr).toContain(said)
      expect(r.stderr).not.toMatch(/RangeError|\n\s+at /)
    }
    for (const ceiling of ["1e300", "20161"]) {
      const r = await roster("worker", "run", "alice", "--ceiling", ceiling, "x")
      expect(r.code).toBe(1)
      expect(r.stderr).toContain("at most 20160 (14 days)")
    }
    expect(JSON.parse((await roster("task", "list", "--json")).stdout)).toEqual([])
  })

  it("a usage error says what was wrong and the command's usage, exit 2 (never [object Object])", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp, string]> = [
      [["worker", "run", "alice", "--ceiling", "abc", "x"], /'abc' is not a float/, "usage: roster worker run [--ceiling float] [--channel text] <worker> <prompt>..."],
      [["worker", "run", "alice"], /Missing argument <prompt>/, "usage: roster worker run"],
      [["task", "add"], /Missing argument <worker>/, "usage: roster task add"],
      [["frob"], /Invalid subcommand/, "more: roster --help"]
    ]
    for (const [args, what, usage] of cases) {
      const r = await roster(...args)
      expect(r.code, args.join(" ")).toBe(2)
      expect(r.stderr).toMatch(what)
      expect(r.stderr).toContain(usage)
      expect(r.stderr).not.toContain("[object Object]")
    }
  })

  it("--help after a subcommand that is not one says so, lists the group's real ones, exit 2 (never the root page and 0)", async () => {
    for (const [args, group, has] of [
      [["connection", "frobnicate", "--help"], "roster connection", "add, login, list, rm"],
      [["worker", "frobnicate", "--help"], "roster worker", "add, list, show, edit, run"],
      [["frob", "-h"], "roster", "init, worker, talk"]
    ] as const) {
      const r = await roster(...args)
      expect(r.code, args.join(" ")).toBe(2)
      expect(r.stdout, args.join(" ")).toBe("")
      expect(r.stderr).toContain(`roster: unknown command "${group} ${args[args.length - 2]}" — ${group} has: ${has}`)
      expect(r.stderr).toContain(`more: ${group} --help`)
    }
    // A real command's page, and one of a command taking arguments, are still pages.
    expect((await roster("worker", "run", "--help")).code).toBe(0)
    expect((await roster("worker", "show", "alice", "--help")).code).toBe(0)
  })

  it("prints no colour codes into a pipe (help and usage errors included)", async () => {
    for (const args of [["--help"], ["worker", "run", "--help"], ["worker", "run", "alice"]]) {
      const r = await roster(...args)
      expect(`${r.stdout}${r.stderr}`, args.join(" ")).not.toContain("\x1b[")
    }
  })

  it("roster server unit prints a systemd unit for this deployment that systemd accepts", async () => {
    for (const user of [false, true]) {
      const r = await roster("server", "unit", ...(user ? ["--user"] : []))
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout).toMatch(new RegExp(`ExecStart=\\S*node --max-semi-space-size=1 --optimize-for-size ${ROSTER_BIN} server start --foreground`))
      expect(r.stdout).toContain(`Environment=ROSTER_HOME=${home}`)
      expect(r.stdout).toContain("Restart=on-failure")
      expect(r.stdout).toContain(user ? "WantedBy=default.target" : "Requires=docker.service")
      expect(r.stdout).not.toMatch(/sk-|API_KEY/)
      const unitFile = path.join(home, user ? "roster-user.service" : "roster.service")
      fs.writeFileSync(unitFile, r.stdout)
      // systemd's own check, where this machine has it (it does here; a machine without systemd has nothing to run the unit).
      const analyze = spawnSync("systemd-analyze", ["verify", unitFile], { encoding: "utf8" })
      if (analyze.error === undefined) expect(analyze.status, analyze.stderr).toBe(0)
    }
  })

  it("a bad org.toml is reported with the file, every key and a fix", async () => {
    const file = path.join(home, "config", "org.toml")
    const saved = fs.readFileSync(file, "utf8")
    fs.writeFileSync(file, "[box]\npids_limit = -1\negress_lockdwn = true\n")
    try {
      const r = await roster("worker", "run", "alice", "x")
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(file)
      expect(r.stderr).toContain("box.pids_limit")
      expect(r.stderr).toContain("box.egress_lockdwn")
    } finally {
      fs.writeFileSync(file, saved)
    }
  })

  it("connection add reads the secret from stdin or the environment, never argv, and list never shows it", async () => {
    const child = spawn(ROSTER_BIN, ["connection", "add", "github", "--kind", "basic"], {
      env: { ...process.env, ROSTER_HOME: home, HOME: home }, stdio: ["pipe", "pipe", "pipe"]
    })
    child.stdin.end("ghp_SECRET_from_stdin\n")
    expect((await collect(child)).code).toBe(0)
    const list = await roster("connection", "list", "--json")
    expect(JSON.parse(list.stdout)).toMatchObject([{ name: "github", kind: "basic" }])
    expect(list.stdout).not.toContain("SECRET")
    expect(fs.statSync(path.join(home, "data", "vault", "github.json")).mode & 0o777).toBe(0o600)
    expect((await roster("connection", "rm", "github")).code).toBe(0)
    expect((await roster("connection", "rm", "github")).code).toBe(1)
  })

  it("policy check says allowed with the deciding rule, or refused with the lines that would allow it (exit 1)", async () => {
    const file = path.join(home, "config", "org.toml")
    const saved = fs.readFileSync(file, "utf8")
    fs.appendFileSync(file, [
      "", "[[grant]]", `name = "model"`, `hosts = ["api.example.com"]`, `scope = ["org/alice"]`, `credential = "nothing-here"`,
      "[[allow]]", `hosts = ["*.example.org"]`, "ports = [443, 8443]", `scope = ["org/*"]`, ""
    ].join("\n"))
    try {
      const granted = await roster("policy", "check", "alice", "https://api.example.com/v1/messages")
      expect(granted.code, granted.stderr).toBe(0)
      expect(granted.stdout).toContain(`rule: [[grant]] "model"`)
      expect(granted.stdout).toContain(`no credential "nothing-here" is connected`)
      const json = JSON.parse((await roster("policy", "check", "bob", "docs.example.org:8443", "--json")).stdout)
      expect(json).toMatchObject({ allowed: true, how: "tunnelled", host: "docs.example.org", port: 8443, subject: "org/bob" })
      const refused = await roster("policy", "check", "bob", "https://api.example.com/")
      expect(refused.code).toBe(1)
      expect(refused.stdout).toContain("refused (no_rule, 403)")
      expect(refused.stdout).toContain(`scope = ["org/alice","org/bob"]`)
      const port = JSON.parse((await roster("policy", "check", "bob", "https://docs.example.org:9443/", "--json")).stdout)
      expect(port).toMatchObject({ allowed: false, status: 403, why: "wrong_port", org_toml: [expect.any(String), "ports = [443, 8443, 9443]"] })
      const nobody = await roster("policy", "check", "nobody", "https://example.com/")
      expect(nobody.code).toBe(1)
      expect(nobody.stderr).toContain("roster worker add nobody")
    } finally {
      fs.writeFileSync(file, saved)
    }
  })

  it("policy check with --method, --graphql-op, --jsonrpc and --websocket decides one request by the entry's rules, through the CLI", async () => {
    const file = path.join(home, "config", "org.toml")
    const saved = fs.readFileSync(file, "utf8")
    fs.appendFileSync(file, [
      "", "[[grant]]", `name = "github"`, `hosts = ["api.github.example.com"]`, `scope = ["org/alice"]`, `credential = "github"`,
      "[[grant.rules]]", `methods = ["DELETE"]`, `action = "deny"`,
      "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/repos/acme/*/pulls"]`, `action = "allow"`,
      "[[grant.rules]]", `paths = ["/graphql"]`, "graphql = true", `operations = ["query"]`, `action = "allow"`,
      "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["tools/call:read_file"]`, `action = "allow"`,
      "[[grant.rules]]", `paths = ["/repos/acme/*/events"]`, "websocket = true", `action = "ask"`,
      "[[allow]]", `hosts = ["mirror.example.com"]`, `scope = ["org/*"]`,
      "[[allow.rules]]", `methods = ["GET"]`, `paths = ["/pub/**"]`, `action = "allow"`, ""
    ].join("\n"))
    const check = (...args: Array<string>) => roster("policy", "check", "alice", ...args)
    try {
      const pulls = await check("https://api.github.example.com/repos/acme/app/pulls", "--method", "POST")
      expect(pulls.code, pulls.stderr).toBe(0)
      expect(pulls.stdout).toMatch(/request: POST \/repos\/acme\/app\/pulls allowed by rule 2 /)
      const deleted = await check("https://api.github.example.com/repos/acme/app", "--method", "DELETE")
      expect(deleted.code).toBe(1)
      expect(deleted.stdout).toContain(`refused (request_rule, 403)`)
      // A GraphQL or JSON-RPC probe is a POST unless said otherwise.
      expect((await check("https://api.github.example.com/graphql", "--graphql-op", "query:Viewer")).code).toBe(0)
      expect((await check("https://api.github.example.com/graphql", "--graphql-op", "mutation:DeleteRepo")).code).toBe(1)
      expect((await check("https://api.github.example.com/mcp", "--jsonrpc", "tools/call:read_file")).code).toBe(0)
      expect((await check("https://api.github.example.com/mcp", "--jsonrpc", "tools/call:write_file")).code).toBe(1)
      const events = await check("https://api.github.example.com/repos/acme/app/events", "--websocket")
      expect(events.code).toBe(0)
      expect(events.stdout).toMatch(/^asked: /)
      expect((await check("https://api.github.example.com/repos/acme/app", "--websocket")).code).toBe(1)
      const mirror = JSON.parse((await check("https://mirror.example.com/pub/x", "--json")).stdout)
      expect(mirror).toMatchObject({ allowed: true, how: "intercepted", rule: `[[allow]] hosts = ["mirror.example.com"]` })
      expect((await check("https://mirror.example.com/admin")).code).toBe(1)
    } finally {
      fs.writeFileSync(file, saved)
    }
  })

  it("usage sums the spend ledger per worker, filtered by worker and day", async () => {
    const ledger = path.join(home, "state", "ledger")
    fs.mkdirSync(ledger, { recursive: true })
    const entry = (day: string, worker: string, run: string, usd: number, priced = true) =>
      JSON.stringify({ time: `${day}T10:00:00.000Z`, run_id: run, worker, model: "claude-sonnet-4-5", input: 100, output: 10, cache_read: 5, cache_write: 1, usd, priced })
    fs.writeFileSync(path.join(ledger, "2026-11-27.jsonl"), `${entry("2026-11-27", "alice", "2026-11-27-10-00-00-000000a1", 0.5)}\n`)
    fs.writeFileSync(path.join(ledger, "2026-11-28.jsonl"), [entry("2026-11-28", "alice", "2026-11-28-10-00-00-000000a2", 0.25), entry("2026-11-28", "alice", "2026-11-28-10-00-00-000000a2", 0.25), entry("2026-11-28", "bob", "2026-11-28-10-00-00-000000b3", 1, false), "{torn"].join("\n"))
    try {
      const all = JSON.parse((await roster("usage", "--json")).stdout)
      expect(all.workers.alice).toMatchObject({ runs: 2, answers: 3, input_tokens: 300, output_tokens: 30, cache_read_tokens: 15, usd: 1 })
      expect(all.total).toMatchObject({ runs: 3, answers: 4, usd: 2, unpriced_answers: 1 })
      const since = JSON.parse((await roster("usage", "--json", "--since", "2026-11-28", "--worker", "alice")).stdout)
      expect(Object.keys(since.workers)).toEqual(["alice"])
      expect(since.total).toMatchObject({ answers: 2, usd: 0.5 })
      const text = await roster("usage")
      expect(text.stdout).toMatch(/alice +2 +3 +300 +30 +15 +3 +1\.0000/)
      expect(text.stdout).toContain("1 answer(s) were of a model with no price")
      const bad = await roster("usage", "--since", "yesterday")
      expect(bad.code).toBe(1)
      expect(bad.stderr).toContain("--since wants a day as YYYY-MM-DD")
    } finally {
      fs.rmSync(ledger, { recursive: true, force: true })
    }
  })

  it("usage --channel sums what one chat channel's runs spent, and today's spending against its budget", async () => {
    const ledger = path.join(home, "state", "ledger")
    fs.mkdirSync(ledger, { recursive: true })
    const today = new Date().toISOString().slice(0, 10)
    const entry = (day: string, worker: string, run: string, usd: number, chat?: string) =>
      JSON.stringify({
        time: `${day}T00:00:01.000Z`, run_id: run, worker, model: "claude-sonnet-4-5", input: 100, output: 10, cache_read: 0, cache_write: 0, usd, priced: true,
        ...(chat ? { chat_channel: chat } : {})
      })
    fs.writeFileSync(path.join(ledger, "2026-11-20.jsonl"), `${entry("2026-11-20", "alice", "2026-11-20-10-00-00-000000c1", 2, "slack:c0team")}\n`)
    fs.writeFileSync(path.join(ledger, `${today}.jsonl`), [
      entry(today, "alice", "2026-11-29-10-00-00-000000c2", 0.5, "slack:c0team"),
      entry(today, "bob", "2026-11-29-10-00-00-000000c3", 0.25, "slack:c0team"),
      entry(today, "alice", "2026-11-29-10-00-00-000000c4", 4),
      entry(today, "alice", "2026-11-29-10-00-00-000000c5", 8, "discord:123")
    ].join("\n"))
    try {
      // The id as typed in org.toml (any case) names the channel.
      const team = JSON.parse((await roster("usage", "--json", "--channel", "slack:C0TEAM")).stdout)
      expect(team.workers.alice).toMatchObject({ runs: 2, answers: 2, usd: 2.5 })
      expect(team.workers.bob).toMatchObject({ runs: 1, usd: 0.25 })
      expect(team.total.usd).toBe(2.75)
      expect(team.channel).toEqual({ key: "slack:c0team", budget_usd_day: null, spent_today_usd: 0.75, day: today })
      const text = await roster("usage", "--channel", "slack:C0TEAM", "--worker", "alice")
      expect(text.stdout).toContain(`slack channel C0TEAM: $0.7500 (est.) spent today (${today}, UTC), no budget_usd_day`)
      expect(text.stdout).toMatch(/alice +2 +2 +200 +20 +0 +0 +2\.5000/)
      const none = await roster("usage", "--channel", "slack:C0NONE")
      expect(none.stdout).toContain("no model answers recorded for this channel")
      const bad = await roster("usage", "--channel", "C0TEAM")
      expect(bad.code).toBe(1)
      expect(bad.stderr).toContain("--channel wants slack:<channel-id> or discord:<channel-id>")
    } finally {
      fs.rmSync(ledger, { recursive: true, force: true })
    }
  })

  /**
   * Every command the root help lists (a new one is covered without touching these tests), its
   * help page at 80 columns (as this suite's commands run), 120 and 1000. Each page is its own
   * process: started a few at a time, once for both tests.
   */
  let helpPages: Promise<{ readonly root: string; readonly pages: ReadonlyArray<{ readonly cmd: ReadonlyArray<string>; readonly piped: Result; readonly at120: string; readonly wide: string }> }> | undefined
  const allHelp = () =>
    (helpPages ??= (async () => {
      const helpAt = (columns: number, cmd: ReadonlyArray<string>) =>
        collect(spawn(ROSTER_BIN, [...cmd, "--help"], { env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: String(columns) }, stdio: ["ignore", "pipe", "pipe"] }))
      const root = (await roster("--help")).stdout
      const listed = root.split("\n")
        .map((l) => /^ {2}([a-z][a-z-]*(?: [a-z][a-z-]*)*)(?= {2}|$)/.exec(l)?.[1])
        .filter((c): c is string => c !== undefined && !c.startsWith("roster"))
      const cmds = [[], ["worker"], ...listed.map((c) => c.split(" "))]
      const renders = await inPool(cmds.flatMap((cmd) => [0, 120, 1000].map((width) => ({ cmd, width }))), ({ cmd, width }) =>
        width === 0 ? roster(...cmd, "--help") : helpAt(width, cmd))
      return { root, pages: cmds.map((cmd, i) => ({ cmd, piped: renders[i * 3]!, at120: renders[i * 3 + 1]!.stdout, wide: renders[i * 3 + 2]!.stdout })) }
    })())

  it("every command has --help in roster's words: the whole command in its usage, no type blurbs, as its snapshot says", async () => {
    const { pages, root } = await allHelp()
    // Every command has a group on the root page.
    expect(root).not.toContain("\nOTHER\n")
    expect(pages.map((p) => p.cmd.join(" "))).toEqual(expect.arrayContaining(["init", "worker run", "talk", "task add", "store restore", "server unit", "doctor"]))
    for (const { cmd, piped: r } of pages.filter((p) => p.cmd.join(" ") !== "worker")) {
      const what = cmd.join(" ") || "roster"
      expect(r.code, what).toBe(0)
      expect(r.stdout, what).toContain("USAGE")
      expect(r.stdout, what).toContain(`$ ${["roster", ...cmd].join(" ")}`)
      for (const blurb of ["A user-defined piece of text.", "This setting is optional.", "A floating point number.", "A true or false value.", "An integer."]) {
        expect(r.stdout, `${what}: ${blurb}`).not.toContain(blurb)
      }
      // The help as it reads: a changed text is a changed snapshot, reviewed in the diff (vitest -u rewrites them).
      await expect(r.stdout).toMatchFileSnapshot(path.join("__snapshots__", "help", `${["roster", ...cmd].join("-")}.txt`))
    }
    for (const cmd of ["worker run", "talk", "connection add", "task add"]) {
      expect(pages.find((p) => p.cmd.join(" ") === cmd)?.piped.stdout.replace(/\s+/g, " "), cmd).toMatch(/Example: roster /)
    }
  })

  it("help pages read on an 80- and a 120-column terminal: no line too long, no word broken across lines", async () => {
    const words = (text: string) => text.split(/\s+/).filter((w) => w !== "")
    for (const { at120, cmd, piped, wide } of (await allHelp()).pages) {
      for (const [width, page] of [[80, piped.stdout], [120, at120]] as const) {
        const what = `roster ${cmd.join(" ")} --help at ${width} columns`
        for (const line of page.split("\n")) {
          if (line.length > width) expect(words(line), `${what}: a line of ${line.length} characters that is not one long word: ${line}`).toHaveLength(1)
        }
        // The same words in the same order as on a page too wide to wrap: none was cut in two.
        expect(words(page), what).toEqual(words(wide))
      }
    }
  })
})

describe("ROSTER_TRACE", () => {
  it("writes each named step of a command, with its parent and duration, as JSON lines at exit", async () => {
    const own = fs.mkdtempSync(path.join(os.tmpdir(), "roster-trace-"))
    const file = path.join(own, "trace.jsonl")
    const env = { ...process.env, ROSTER_HOME: own, HOME: own }
    expect((await collect(spawn(ROSTER_BIN, ["init"], { env, stdio: ["ignore", "pipe", "pipe"] }))).code).toBe(0)
    const r = await collect(spawn(ROSTER_BIN, ["worker", "show", "alice", "--json"], { env: { ...env, ROSTER_TRACE: file }, stdio: ["ignore", "pipe", "pipe"] }))
    expect(r.code, r.stderr).toBe(0)
    const steps = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { name: string; parent: string | null; ms: number })
    expect(steps.map((s) => s.name)).toContain("workers.readIdentity")
    expect(steps.every((s) => typeof s.ms === "number" && s.ms >= 0)).toBe(true)
  })
})

describe("the CLI's start-up from V8's code cache (bin/roster.js)", () => {
  // A group named without a command prints its page with the program loaded (`--help` pages are answered without it, below).
  const helpWith = (cacheHome: string) =>
    collect(spawn(ROSTER_BIN, ["worker"], { env: { ...process.env, ROSTER_HOME: home, HOME: home, XDG_CACHE_HOME: cacheHome }, stdio: ["ignore", "pipe", "pipe"] }))
  const cacheFiles = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".v8")) : [])

  it("writes one cache in the person's own 0700 folder, starts from it, and rewrites one V8 rejects", async () => {
    const cacheHome = fs.mkdtempSync(path.join(os.tmpdir(), "roster-cache-"))
    const dir = path.join(cacheHome, "roster")
    const first = await helpWith(cacheHome)
    expect(first.code, first.stderr).toBe(0)
    const [file] = cacheFiles(dir)
    expect(file).toMatch(/^cli-[0-9a-f]{12}-[0-9a-f]{12}\.v8$/)
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
    expect(fs.statSync(path.join(dir, file!)).mode & 0o777).toBe(0o600)
    const written = fs.statSync(path.join(dir, file!))
    // Accepted: the same help, and the cache is not written again.
    const second = await helpWith(cacheHome)
    expect(second.stdout).toBe(first.stdout)
    const after = fs.statSync(path.join(dir, file!))
    expect([after.ino, after.mtimeMs]).toEqual([written.ino, written.mtimeMs])
    // Rejected (not V8's data): the command still runs, and the cache is made again.
    fs.writeFileSync(path.join(dir, file!), "not a code cache")
    const third = await helpWith(cacheHome)
    expect(third.stdout).toBe(first.stdout)
    expect(fs.statSync(path.join(dir, file!)).size).toBeGreaterThan(100_000)
    expect(cacheFiles(dir)).toEqual([file])
  })

  it("creates nothing in a home that is not the user's (sudo keeping HOME), and runs all the same", async () => {
    // Root (CI) hands a fresh folder to nobody; anyone else already has one that is not theirs.
    const foreign = process.getuid?.() === 0 ? fs.mkdtempSync(path.join(os.tmpdir(), "roster-foreign-home-")) : "/"
    const before = fs.readdirSync(foreign)
    if (foreign !== "/") {
      fs.chmodSync(foreign, 0o755)
      fs.chownSync(foreign, 65534, 65534)
    }
    const { XDG_CACHE_HOME: _, ...env } = process.env
    const r = await collect(spawn(ROSTER_BIN, ["worker", "--help"], { env: { ...env, ROSTER_HOME: home, HOME: foreign }, stdio: ["ignore", "pipe", "pipe"] }))
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain("roster")
    expect(fs.readdirSync(foreign)).toEqual(before)
  })

  it("never reads or writes a cache in a folder others can write (a code cache is code)", async () => {
    const cacheHome = fs.mkdtempSync(path.join(os.tmpdir(), "roster-cache-"))
    const dir = path.join(cacheHome, "roster")
    fs.mkdirSync(dir, { mode: 0o777 })
    fs.chmodSync(dir, 0o777)
    const planted = path.join(dir, "planted.v8")
    fs.writeFileSync(planted, "x")
    const r = await helpWith(cacheHome)
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain("roster")
    expect(cacheFiles(dir)).toEqual(["planted.v8"])
  })

  it("the root help without loading the program: the program's own page at every width, and only beside the bundle it was written from", async () => {
    const dist = path.join(path.dirname(ROSTER_BIN), "..", "dist")
    const bundle = path.join(dist, "roster.cjs")
    const at = (columns: number, args: ReadonlyArray<string>, bin = ROSTER_BIN) =>
      collect(spawn(bin, [...args], { env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: String(columns) }, stdio: ["ignore", "pipe", "pipe"] }))
    const program = (columns: number) =>
      collect(spawn(process.execPath, [bundle, "--help"], { env: { ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: String(columns) }, stdio: ["ignore", "pipe", "pipe"] }))
    // Every width is the widest page wrapped (a unit test, 21-200 columns): a narrow, the usual and the widest here.
    for (const [columns, asks] of [[21, [["--help"]]], [80, [["--help"], ["-h"], []]], [1000, [["--help"]]]] as const) {
      const want = await program(columns)
      expect(want.code).toBe(0)
      for (const args of asks) {
        const got = await at(columns, args)
        expect([got.code, got.stdout], `roster ${args.join(" ")} at ${columns} columns`).toEqual([0, want.stdout])
      }
    }
    // A copy of the install whose page says otherwise: shown while it is the bundle's, never once the bundle changed.
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), "roster-help-"))
    try {
      fs.cpSync(path.join(path.dirname(ROSTER_BIN)), path.join(copy, "bin"), { recursive: true })
      fs.mkdirSync(path.join(copy, "dist"))
      for (const f of ["roster.cjs", "help.cjs", "help-root.json", "help-pages.json"]) fs.copyFileSync(path.join(dist, f), path.join(copy, "dist", f))
      fs.copyFileSync(path.join(dist, "..", "package.json"), path.join(copy, "package.json"))
      const page = JSON.parse(fs.readFileSync(path.join(dist, "help-root.json"), "utf8")) as { build: string }
      expect(fs.readFileSync(bundle, "utf8").endsWith(`\n//# roster-build=${page.build}\n`)).toBe(true)
      fs.writeFileSync(path.join(copy, "dist", "help-root.json"), JSON.stringify({ build: page.build, text: "the page written with this bundle\n" }))
      fs.writeFileSync(path.join(copy, "dist", "help-pages.json"), JSON.stringify({ build: page.build, pages: { "worker run": "worker run's page written with this bundle" } }))
      const bin = path.join(copy, "bin", "roster.js")
      expect((await at(80, ["--help"], bin)).stdout).toBe("the page written with this bundle\n")
      expect((await at(80, ["worker", "run", "--help"], bin)).stdout).toBe("worker run's page written with this bundle\n")
      fs.appendFileSync(path.join(copy, "dist", "roster.cjs"), "//# roster-build=0123456789abcdef\n")
      const rebuilt = await at(80, ["--help"], bin)
      expect(rebuilt.code, rebuilt.stderr).toBe(0)
      expect(rebuilt.stdout).toBe((await program(80)).stdout)
      const command = await at(80, ["worker", "run", "--help"], bin)
      expect(command.stdout).toContain("$ roster worker run")
    } finally {
      fs.rmSync(copy, { recursive: true, force: true })
    }
  })

  it("a command's help without loading the program: the program's own page, piped at any width, -h too, and on a terminal with its colours (or NO_COLOR)", async () => {
    const bundle = path.join(path.dirname(ROSTER_BIN), "..", "dist", "roster.cjs")
    const env = (columns: number) => ({ ...process.env, ROSTER_HOME: home, HOME: home, COLUMNS: String(columns) })
    const asks = ([["worker"], ["worker", "run"], ["task", "add"], ["server", "status"], ["connection", "add"]] as const)
      .flatMap((cmd) => [33, 80, 1000].map((columns) => ({ cmd, columns, flag: columns === 80 ? "-h" : "--help" })))
    const pairs = await inPool(asks, async ({ cmd, columns, flag }) => {
      const fast = await collect(spawn(ROSTER_BIN, [...cmd, flag], { env: env(columns), stdio: ["ignore", "pipe", "pipe"] }))
      const program = await collect(spawn(process.execPath, [bundle, ...cmd, flag], { env: env(columns), stdio: ["ignore", "pipe", "pipe"] }))
      return { what: `${cmd.join(" ")} ${flag} at ${columns}`, fast: [fast.code, fast.stdout], program: [program.code, program.stdout] }
    })
    for (const p of pairs) expect(p.fast, p.what).toEqual(p.program)
    expect(pairs.find((p) => p.what === "worker run --help at 33")?.fast[1]).toContain("$ roster worker run")
    // On a terminal (util-linux's script gives the command one): the same bytes as the program, bold headings and all.
    for (const noColor of ["", "1"]) {
      const tty = (cmd: string) => execFileSync("script", ["-qc", cmd, "/dev/null"], { env: { ...env(70), NO_COLOR: noColor } }).toString()
      const fast = tty(`${ROSTER_BIN} worker run --help`)
      expect(fast, `NO_COLOR=${noColor}`).toBe(tty(`${process.execPath} ${bundle} worker run --help`))
      expect(fast.includes("\x1b[0;1mUSAGE"), `NO_COLOR=${noColor}`).toBe(noColor === "")
    }
  })
})
