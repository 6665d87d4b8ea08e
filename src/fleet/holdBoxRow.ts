import { Effect, Option } from "effect"
import { FleetMember } from "./FleetMember.js"

/**
 * Holds `worker`'s box row fleet-wide (`key` names the box) until the scope closes: one box per
 * worker across the fleet for a box that is not a task's. Waits, saying so once through `waiting`,
 * while another box of the worker runs anywhere (a task, a chat session, another handed-over run);
 * a database that does not answer is tried again each second. Nothing on a machine on its own.
 */
export const holdBoxRow = <R>(worker: string, key: string, waiting: (text: string) => Effect.Effect<void, never, R>) =>
  Effect.gen(function*() {
    const member = yield* Effect.serviceOption(FleetMember)
    if (Option.isNone(member)) return
    const m = member.value
    let said = false
    yield* Effect.acquireRelease(
      Effect.gen(function*() {
        for (;;) {
          const taken = yield* m.takeBox(worker, key).pipe(
            Effect.catchAllCause((c) => Effect.logWarning(`fleet: ${worker}'s box row could not be taken (tried again)`, c).pipe(Effect.as(false)))
          )
          if (taken) return
          if (!said) yield* waiting(`${worker} has a box running in the fleet (one box per worker): this run starts when it ends`)
          said = true
          // Only the wait is interruptible (a person's Ctrl-C): a row taken is always given back.
          yield* Effect.interruptible(Effect.sleep("1 second"))
        }
      }),
      () => m.giveBox(worker, key)
    )
  })
