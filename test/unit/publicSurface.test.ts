import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** Every name an entry point exports, with whether its declaration carries TSDoc. */
const exportsOf = (entry: string) => {
  const program = ts.createProgram([path.join(root, entry)], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true })
  const checker = program.getTypeChecker()
  const source = program.getSourceFile(path.join(root, entry))
  if (!source) throw new Error(`no source for ${entry}`)
  const moduleSymbol = checker.getSymbolAtLocation(source)
  if (!moduleSymbol) throw new Error(`${entry} is not a module`)
  return checker.getExportsOfModule(moduleSymbol).map((s) => {
    const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s
    const documented = target.getDocumentationComment(checker).length > 0 ||
      (target.declarations ?? []).some((d) => ts.getJSDocCommentsAndTags(d).length > 0)
    return { name: s.getName(), documented }
  })
}

describe("the public surface", () => {
  for (const entry of ["src/index.ts", "src/testing.ts"]) {
    it(`every export of ${entry} says what it is (TSDoc)`, () => {
      const exported = exportsOf(entry)
      expect(exported.length).toBeGreaterThan(5)
      expect(exported.filter((e) => !e.documented).map((e) => e.name)).toEqual([])
    }, 60_000)
  }

  it("exports what an embedder needs", () => {
    const names = exportsOf("src/index.ts").map((e) => e.name)
    for (const n of ["runOnce", "runSession", "queueTask", "RosterLive", "Deployment", "Docker", "Paths", "RunLog", "TaskStore", "Reporter",
      "ImageStore", "OrgConfig", "Vault", "RunRecord", "TaskRecord", "ConfigError", "DockerError", "ImageMissing", "ProvisionError", "LockdownError"]) {
      expect(names, n).toContain(n)
    }
    expect(exportsOf("src/testing.ts").map((e) => e.name)).toEqual(expect.arrayContaining(["RosterTest", "DockerFake", "makeDockerTest", "rosterTestServices"]))
  }, 60_000)
})
