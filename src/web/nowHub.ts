import { Effect, Option, Ref, Schedule } from "effect"
import { viaDaemon } from "../api/controlClient.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { type BoxReading, type NowData, nowFragment } from "./nowPage.js"
import { type EventSink, eventStream } from "./respond.js"

/** How often the server looks again (the page never polls: it is told over SSE when something changed). */
const EVERY = "2 seconds"

/**
 * Each live box's engine stats, by run, or why they could not be read: one box's odd answer (a box
 * stopping as it is asked, an engine that answers in another shape) is said on that box's row, never
 * the end of the page. A box the engine no longer lists has no entry.
 */
export const boxReadings = (runIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const backend = yield* BoxBackend
    const readings = new Map<string, BoxReading>()
    yield* Effect.forEach(runIds, (runId) =>
      backend.list({ runId }).pipe(
        Effect.flatMap((list) => (list[0] ? backend.stats(list[0].id) : Effect.succeed(undefined))),
        Effect.match({
          onFailure: (e) => void readings.set(runId, { unreadable: e.message }),
          onSuccess: (st) => void (st && readings.set(runId, st))
        }),
        // A bug in reading one box is that box's too: said on its row, and logged with its cause.
        Effect.catchAllDefect((defect) =>
          Effect.logWarning(`roster web: the stats of run ${runId}'s box could not be read`, defect).pipe(
            Effect.andThen(Effect.sync(() => void readings.set(runId, { unreadable: "the engine's answer could not be read (see roster web's log)" })))
          ))
      ), { concurrency: 8, discard: true })
    return readings
  })

/** The daemon's status and each live box's engine stats, now. */
const look = Effect.gen(function*() {
  const status = Option.getOrNull(yield* viaDaemon((c) => c.server.status()).pipe(Effect.orElseSucceed(() => Option.none())))
  const stats = yield* boxReadings((status?.boxes ?? []).map((b) => b.run_id))
  // A fleet node's page shows what runs on the other nodes too: each node's engine, asked by the daemon.
  const elsewhere = status?.fleet
    ? Option.getOrElse(yield* viaDaemon((c) => c.server.fleetBoxes()).pipe(Effect.orElseSucceed(() => Option.none())), () => [])
    : []
  return { status, stats, elsewhere } satisfies NowData
})

const eventOf = (d: NowData) => `event: now\ndata: ${JSON.stringify({ html: nowFragment(d).text })}\n\n`

/**
 * The Now page's live part: the server looks every two seconds in a fiber of its own and pushes
 * the re-rendered fragment to every open page when it changed — a failure to look is logged and
 * looked at again, never the end of the updates.
 */
export const makeNowHub = Effect.gen(function*() {
  const latest = yield* Ref.make<NowData | undefined>(undefined)
  const pages = new Set<EventSink>()
  let last = ""
  const refresh = look.pipe(
    Effect.tap((d) => Ref.set(latest, d)),
    Effect.tap((d) => Effect.sync(() => {
      const event = eventOf(d)
      if (event === last) return
      last = event
      for (const page of pages) page.push(event)
    }))
  )
  // Only while a page watches: with none open, nobody is told, and the next page looks afresh.
  yield* Effect.suspend(() => (pages.size > 0 ? refresh : Ref.set(latest, undefined))).pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("roster web: could not look at the server", cause)),
    Effect.repeat(Schedule.spaced(EVERY)),
    Effect.forkScoped
  )
  yield* Effect.addFinalizer(() => Effect.sync(() => {
    for (const page of pages) page.end()
  }))
  return {
    /** The last look while pages watch; a fresh one otherwise. */
    current: Effect.flatMap(Ref.get(latest), (d) => (d ? Effect.succeed(d) : refresh)),
    /** Holds the answer open as an event stream: the current state at once, then each change. */
    subscribe: Effect.gen(function*() {
      const now = yield* Effect.flatMap(Ref.get(latest), (d) => (d ? Effect.succeed(d) : refresh))
      return eventStream((page) => {
        page.push(eventOf(now))
        pages.add(page)
        return () => pages.delete(page)
      })
    })
  }
})
