import { Context, Effect, Layer, Ref } from "effect"
import { execFile } from "node:child_process"

export type FirewallTool = "iptables" | "ip6tables"

/** One iptables/ip6tables invocation at a time; true when it exited 0. Test layer: records and answers. */
export class Firewall extends Context.Tag("roster/Firewall")<Firewall, {
  readonly run: (tool: FirewallTool, args: ReadonlyArray<string>) => Effect.Effect<boolean>
}>() {
  static readonly layer = Layer.succeed(Firewall, {
    run: (tool, args) =>
      Effect.async<boolean>((resume) => {
        // -w waits for the xtables lock instead of failing when dockerd holds it.
        const child = execFile(tool, ["-w", "5", ...args], { timeout: 15_000 }, (err) => resume(Effect.succeed(!err)))
        return Effect.sync(() => child.kill())
      })
  })

  static readonly layerTest = (answer: (tool: FirewallTool, args: ReadonlyArray<string>) => boolean = () => true) =>
    Layer.effectContext(Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      return Context.make(Firewall, {
        run: (tool, args) => Ref.update(log, (l) => [...l, `${tool} ${args.join(" ")}`]).pipe(Effect.as(answer(tool, args)))
      }).pipe(Context.add(FirewallLog, log))
    }))
}

export class FirewallLog extends Context.Tag("roster/FirewallLog")<FirewallLog, Ref.Ref<ReadonlyArray<string>>>() {}
