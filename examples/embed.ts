// Embedding roster in an Effect program, against roster's test deployment (a fake engine, no
// Docker needed): a one-shot run with a ceiling, an interrupted run, and a two-turn session.
// Swap `RosterTest(...)` for `RosterLive` to run real boxes on this machine's Docker engine.
import { Effect, Fiber, Mailbox } from "effect"
import { type ContainerSpec, runOnce, runSession, type SessionMessage } from "roster"
import { type ContainerScript, DockerFake, RosterTest } from "roster/testing"

const event = (e: unknown) => JSON.stringify(e)
const answer = (text: string) => event({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text }], stopReason: "stop" } })

/** What each fake box does: a session answers every prompt; a one-shot run answers once, or hangs when asked to. */
const engine = (spec: ContainerSpec): ContainerScript => {
  if (spec.Cmd.includes("rpc")) {
    return {
      hang: true,
      exitOnEof: true,
      onStdin: (line) => {
        const prompt = JSON.parse(line) as { type: string; message?: string }
        return prompt.type !== "prompt" ? [] : [
          event({ type: "response", command: "prompt", success: true }),
          event({ type: "agent_start" }),
          // A session's first message comes after roster's Start preamble (where and who): the fake echoes the message itself.
          answer(`you said: ${(prompt.message ?? "").split("## The first message\n").at(-1)}`),
          event({ type: "agent_end", messages: [], willRetry: false })
        ]
      }
    }
  }
  if (spec.Cmd.at(-1)?.includes("forever")) return { hang: true }
  return { stdout: [`${answer("hello from a fake box")}\n`], exitCode: 0 }
}

const program = Effect.gen(function*() {
  // 1. A one-shot run with a ten-minute ceiling.
  const run = yield* runOnce({ worker: "alice", prompt: "say hello", ceilingMin: 10 })
  console.log(`one-shot: ended by ${run.endedBy}, exit ${run.exitCode}, said "${run.finalText}"`)

  // 2. An interrupt: the box is killed and removed, its record says how the run ended.
  const fake = yield* DockerFake
  const long = yield* Effect.fork(runOnce({ worker: "alice", prompt: "work forever", ceilingMin: 10 }))
  yield* fake.waitFor("containerStart")
  yield* Fiber.interrupt(long)
  const running = [...fake.containers.values()].filter((c) => c.state === "running").length
  console.log(`interrupted: ${running} box(es) still running`)

  // 3. A warm session: two turns in one box, then the inbox closes and the session ends cleanly.
  const inbox = yield* Mailbox.make<SessionMessage>()
  const replies: Array<string> = []
  const session = yield* Effect.fork(runSession({
    worker: "alice",
    inbox,
    surface: "term-session",
    onReply: (text) => Effect.sync(() => void replies.push(text)),
    onTurnEnd: (turn) => (turn === 2 ? inbox.end.pipe(Effect.asVoid) : Effect.void)
  }))
  yield* inbox.offerAll([
    { text: "first", author: "me", provider: "terminal", messageId: "1" },
    { text: "second", author: "me", provider: "terminal", messageId: "2" }
  ])
  const ended = yield* Fiber.join(session)
  console.log(`session: ${ended.turns} turns, ended ${ended.reason}: ${replies.join(" / ")}`)
})

Effect.runPromise(program.pipe(Effect.provide(RosterTest({ docker: { script: engine } })))).catch((e) => {
  console.error(e)
  process.exit(1)
})
