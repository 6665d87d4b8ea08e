import { Command } from "@effect/cli"
import { VERSION } from "../contract/version.js"
import { boxCommand } from "./boxCommand.js"
import { connectionCommand } from "./connectionCommand.js"
import { doctorCommand } from "./doctorCommand.js"
import { approvalCommands } from "./approvalsCommand.js"
import { policyCommand } from "./policyCommand.js"
import { usageCommand } from "./usageCommand.js"
import { webCommand } from "./webCommand.js"
import { rehearsalCommand } from "./rehearsalCommand.js"
import { talkCommand } from "./talkCommand.js"
import { initCommand } from "./initCommand.js"
import { runsCommand } from "./runsCommand.js"
import { serverCommand } from "./serverCommand.js"
import { memoryCommand } from "./memoryCommand.js"
import { storeCommand } from "./storeCommand.js"
import { taskCommand } from "./taskCommand.js"
import { workerCommand } from "./workerCommand.js"

export const roster = Command.make("roster").pipe(
  Command.withDescription(
    "Run AI workers (the pi coding agent) in locked-down Docker boxes whose only way out is roster's gateway. " +
      "Start with: roster init"
  ),
  Command.withSubcommands([initCommand, workerCommand, talkCommand, taskCommand, memoryCommand, storeCommand, serverCommand, runsCommand, usageCommand, webCommand, connectionCommand, policyCommand, ...approvalCommands, boxCommand, doctorCommand, rehearsalCommand])
)

export const cli = Command.run(roster, { name: "roster", version: VERSION })
