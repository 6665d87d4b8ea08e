import { Effect, Either, ParseResult, Schema } from "effect"
import { FileSystem } from "@effect/platform"
import { parse as parseToml } from "smol-toml"
import { isNotFound } from "../fs/notFound.js"

export interface ConfigProblem {
  readonly key: string
  readonly problem: string
}

/** Every problem of one file at once: the file, each key, and what is wrong with it. */
export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  file: Schema.String,
  problems: Schema.Array(Schema.Struct({ key: Schema.String, problem: Schema.String })),
  hint: Schema.optional(Schema.String)
}) {
  override get message() {
    const lines = this.problems.map((p) => `  ${p.key === "" ? "(file)" : p.key}: ${p.problem}`)
    const count = this.problems.length === 1 ? "a problem" : `${this.problems.length} problems`
    const hint = this.hint ? `\n${this.hint}` : `\nfix the keys above in ${this.file} and run again`
    return `${this.file} has ${count}:\n${lines.join("\n")}${hint}`
  }
}

const keyOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, part) =>
    typeof part === "number" ? `${acc}[${part}]` : acc === "" ? String(part) : `${acc}.${String(part)}`, "")

/** Schema issues as `key: problem` lines, unknown keys included so a typo never silently turns a setting off. */
export const problemsOf = (error: ParseResult.ParseError): Array<ConfigProblem> =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    // An optional key is "X | undefined": the undefined branch's complaint says nothing useful.
    .filter((issue) => !issue.message.startsWith("Expected undefined"))
    .map((issue) => ({
      key: keyOf(issue.path),
      problem: issue.message.startsWith("is unexpected")
        ? "unknown key (check its spelling against the commented defaults `roster init` writes)"
        : issue.message
    }))

export const decodeToml = <A, I>(schema: Schema.Schema<A, I>, file: string, text: string): Either.Either<A, ConfigError> => {
  let raw: unknown
  try {
    raw = parseToml(text)
  } catch (cause) {
    const msg = cause instanceof Error ? cause.message.split("\n")[0] ?? String(cause) : String(cause)
    return Either.left(new ConfigError({ file, problems: [{ key: "", problem: `not valid TOML: ${msg}` }] }))
  }
  return Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(raw).pipe(
    Either.mapLeft((error) => new ConfigError({ file, problems: problemsOf(error) }))
  )
}

/** Reads and decodes a TOML file; a missing file is `onMissing`. */
export const readToml = <A, I>(
  schema: Schema.Schema<A, I>,
  file: string,
  onMissing: Effect.Effect<A, ConfigError>
) => Effect.flatMap(FileSystem.FileSystem, (fs) => readTomlIn(fs)(schema, file, onMissing))

/** {@link readToml} through a file system taken once (a reader's, when its layer is built): it needs nothing of its caller. */
export const readTomlIn = (fs: FileSystem.FileSystem) =>
<A, I>(
  schema: Schema.Schema<A, I>,
  file: string,
  onMissing: Effect.Effect<A, ConfigError>
) =>
  Effect.gen(function*() {
    // Missing is onMissing; one that is there and cannot be read (or looked at) says so, never "run roster init".
    const text = yield* fs.readFileString(file).pipe(Effect.either)
    if (text._tag === "Left" && isNotFound(text.left)) return yield* onMissing
    if (text._tag === "Left") return yield* new ConfigError({ file, problems: [{ key: "", problem: `cannot be read: ${text.left.message}` }] })
    return yield* decodeToml(schema, file, text.right)
  })
