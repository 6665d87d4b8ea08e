import * as path from "node:path"

/** The files of one run folder (data/runs/<worker>/<run-id>/): the host writes them, `runs show` and the box's self view read them. */
export const runFiles = (runDir: string) => ({
  record: path.join(runDir, "run.json"),
  context: path.join(runDir, "context.json"),
  transcript: path.join(runDir, "stdout.jsonl"),
  stderr: path.join(runDir, "stderr.log"),
  /** What the box sent its person with message_user (written by the gateway). */
  messages: path.join(runDir, "messages.jsonl"),
  /** What the gateway and people learn of the run while it runs (taints, warnings, pushes), appended. */
  events: path.join(runDir, "events.jsonl"),
  /**
   * The same, appended by one node of a fleet: each node appends only to its own file, since two
   * machines appending to one file over NFS can interleave or lose lines.
   */
  nodeEvents: (node: string) => path.join(runDir, `events.${node}.jsonl`),
  /** A session's turn inputs, one line each. */
  turns: path.join(runDir, "turns.jsonl"),
  home: path.join(runDir, "home"),
  /** What people sent the run (a chat message's files under files/<message-id>/), read-only in the box at /pihome/inbox. */
  inbox: path.join(runDir, "inbox"),
  self: path.join(runDir, "self")
})
