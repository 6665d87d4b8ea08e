import { Context, Effect, Layer, Ref, Schema } from "effect"
import { execFile } from "node:child_process"

/** A host git command that failed or timed out, with git's last words. */
export class GitError extends Schema.TaggedError<GitError>()("GitError", {
  command: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `git ${this.command} failed: ${this.detail}`
  }
}

/** One host-side git command. */
export interface GitCall {
  readonly args: ReadonlyArray<string>
  /** Runs as `git -C <cwd>`. */
  readonly cwd?: string
  readonly gitDir?: string
  readonly workTree?: string
  readonly indexFile?: string
  /** Repositories this call may open though they are not the host user's (a box-owned clone): safe.directory names only these. */
  readonly trust?: ReadonlyArray<string>
  readonly input?: string
  readonly timeoutMs?: number
}

/** Default time a host git command may take before it is killed. */
export const GIT_TIMEOUT_MS = 120_000

/**
 * What every host git command carries, whatever repository it touches: no hook, no fsmonitor, no
 * credential helper or ssh command runs; the file protocol only when this command asked for it
 * (not a submodule); objects from a box are checked before they are kept.
 */
export const HARDENING = [
  "-c", "core.hooksPath=/dev/null",
  "-c", "core.fsmonitor=false",
  "-c", "protocol.file.allow=user",
  "-c", "credential.helper=",
  "-c", "core.sshCommand=false",
  "-c", "core.askPass=false",
  "-c", "transfer.fsckObjects=true",
  "-c", "submodule.recurse=false"
] as const

/**
 * A clean environment: no system or global config, no prompts, no inherited GIT_* variable, a
 * fixed identity for the commits roster makes (quarantine snapshots).
 */
export const hardenedEnv = (call: GitCall): NodeJS.ProcessEnv => ({
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: "/nonexistent",
  LC_ALL: "C",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_TERMINAL_PROMPT: "0",
  GIT_ATTR_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "roster",
  GIT_AUTHOR_EMAIL: "roster@roster.test",
  GIT_COMMITTER_NAME: "roster",
  GIT_COMMITTER_EMAIL: "roster@roster.test",
  ...(call.gitDir ? { GIT_DIR: call.gitDir } : {}),
  ...(call.workTree ? { GIT_WORK_TREE: call.workTree } : {}),
  ...(call.indexFile ? { GIT_INDEX_FILE: call.indexFile } : {})
})

export const gitArgv = (call: GitCall): Array<string> => [
  ...HARDENING,
  ...(call.trust ?? []).flatMap((dir) => ["-c", `safe.directory=${dir}`]),
  ...(call.cwd ? ["-C", call.cwd] : []),
  ...call.args
]

const invoke = (call: GitCall) =>
  Effect.async<string, GitError>((resume) => {
    const command = call.args.slice(0, 2).join(" ")
    const child = execFile(
      "git",
      gitArgv(call),
      { env: hardenedEnv(call), timeout: call.timeoutMs ?? GIT_TIMEOUT_MS, killSignal: "SIGKILL", maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (!err) return resume(Effect.succeed(stdout))
        const detail = err.killed ? `killed after ${(call.timeoutMs ?? GIT_TIMEOUT_MS) / 1000} s` : String(stderr).trim().split("\n").slice(-3).join(" / ") || err.message
        resume(Effect.fail(new GitError({ command, detail })))
      }
    )
    if (call.input !== undefined) child.stdin?.end(call.input)
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The host git calls made under `HostGit.layerTest`, in order. */
export class GitLog extends Context.Tag("roster/GitLog")<GitLog, Ref.Ref<ReadonlyArray<GitCall>>>() {}

/**
 * Host-side git, hardened for repositories a box has written (see HARDENING and hardenedEnv).
 * The test layer runs the same real git and records each call, so a test can check what ran.
 */
export class HostGit extends Context.Tag("roster/HostGit")<HostGit, {
  /** stdout of the command; a non-zero exit, a timeout or a missing git is a GitError. */
  readonly run: (call: GitCall) => Effect.Effect<string, GitError>
}>() {
  static readonly layer = Layer.succeed(HostGit, { run: invoke })

  static readonly layerTest = Layer.effectContext(Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<GitCall>>([])
    return Context.make(HostGit, { run: (call) => Ref.update(log, (l) => [...l, call]).pipe(Effect.zipRight(invoke(call))) })
      .pipe(Context.add(GitLog, log))
  }))
}

/** True when the command exits 0 (a question git answers with its exit code). */
export const gitSays = (call: GitCall) =>
  Effect.flatMap(HostGit, (git) => git.run(call).pipe(Effect.as(true), Effect.catchTag("GitError", () => Effect.succeed(false))))

export const git = (call: GitCall) => Effect.flatMap(HostGit, (g) => g.run(call))

/** The trimmed first line of a command's output. */
export const gitLine = (call: GitCall) => git(call).pipe(Effect.map((out) => out.split("\n")[0]?.trim() ?? ""))
