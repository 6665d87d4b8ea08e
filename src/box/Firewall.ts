import { Context, Effect, Layer, Ref } from "effect"
import { execFile } from "node:child_process"

export type FirewallTool = "iptables" | "ip6tables"

const invoke = (tool: FirewallTool, args: ReadonlyArray<string>) =>
  Effect.async<string | undefined>((resume) => {
    // -w waits for the xtables lock instead of failing when dockerd holds it.
    const child = execFile(tool, ["-w", "5", ...args], { timeout: 15_000 }, (err, stdout) => resume(Effect.succeed(err ? undefined : stdout)))
    return Effect.sync(() => child.kill())
  })

/** The iptables calls the test firewall was asked to make, in order. */
export class FirewallLog extends Context.Tag("roster/FirewallLog")<FirewallLog, Ref.Ref<ReadonlyArray<string>>>() {}

/** One iptables/ip6tables invocation at a time; true when it exited 0. Test layer: records and answers. */
export class Firewall extends Context.Tag("roster/Firewall")<Firewall, {
  readonly run: (tool: FirewallTool, args: ReadonlyArray<string>) => Effect.Effect<boolean>
  /** What a listing prints (`-S`), or undefined when the tool failed (not root, not installed). */
  readonly output: (tool: FirewallTool, args: ReadonlyArray<string>) => Effect.Effect<string | undefined>
}>() {
  static readonly layer = Layer.succeed(Firewall, {
    run: (tool, args) => invoke(tool, args).pipe(Effect.map((out) => out !== undefined)),
    output: invoke
  })

  static readonly layerTest = (
    answer: (tool: FirewallTool, args: ReadonlyArray<string>) => boolean = () => true,
    listing: (tool: FirewallTool, args: ReadonlyArray<string>) => string | undefined = () => ""
  ) =>
    Layer.effectContext(Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const note = (tool: FirewallTool, args: ReadonlyArray<string>) => Ref.update(log, (l) => [...l, `${tool} ${args.join(" ")}`])
      return Context.make(Firewall, {
        run: (tool, args) => note(tool, args).pipe(Effect.as(answer(tool, args))),
        output: (tool, args) => note(tool, args).pipe(Effect.as(listing(tool, args)))
      }).pipe(Context.add(FirewallLog, log))
    }))
}

