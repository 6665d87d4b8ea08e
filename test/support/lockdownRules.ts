import { execFileSync } from "node:child_process"

/** Leaves the machine as it was: a deployment's INPUT jump rules and its chain go (iptables and ip6tables). */
export const removeLockdownRules = (chain: string) => {
  for (const tool of ["iptables", "ip6tables"]) {
    try {
      const rules = execFileSync(tool, ["-S", "INPUT"]).toString().split("\n").filter((l) => l.endsWith(`-j ${chain}`))
      for (const rule of rules) execFileSync(tool, ["-D", ...rule.replace(/^-A /, "").split(" ")])
      execFileSync(tool, ["-F", chain])
      execFileSync(tool, ["-X", chain])
    } catch {
      // nothing installed for this tool
    }
  }
}
