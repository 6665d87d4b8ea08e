import { Effect } from "effect"
import { TaskStore } from "./TaskStore.js"

/** The continued task names the task that carries it on: the records link both ways. Never fails the new task. */
export const linkContinuation = (of: string, by: string) =>
  Effect.flatMap(TaskStore, (store) =>
    store.update(of, (t) => ((t.continued_by ?? []).includes(by) ? t : { ...t, continued_by: [...(t.continued_by ?? []), by] }))).pipe(
      Effect.asVoid,
      Effect.catchAll((e) => Effect.logWarning(`task ${of}: its continuation ${by} could not be noted on it: ${e.message}`))
    )
