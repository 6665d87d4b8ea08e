/**
 * Why roster itself ended a task's run, not its agent or a person: its daemon stopped (`stop`),
 * it stopped with its box (`restart`: a crash or a reboot), or its fleet node was cut off from the
 * fleet's database and stopped its boxes (`cut-off`). The task carries on from that run.
 */
export type InterruptedBy = "stop" | "restart" | "cut-off"

export interface Interruption {
  readonly run_id: string
  readonly by: InterruptedBy
  readonly at: string
}
