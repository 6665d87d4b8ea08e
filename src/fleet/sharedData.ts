import { FileSystem } from "@effect/platform"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option, Schema } from "effect"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { readJsonOptional, writeJson } from "../fs/atomic.js"
import { SharedDataError } from "./errors.js"

/** The file in `shared_data` naming the fleet it belongs to: the same folder on every node holds the same id. */
export const MARKER = ".roster-fleet.json"

const Marker = Schema.Struct({ fleet: Schema.String, created_by: Schema.String, created_at: Schema.String })

const problem = (folder: string, detail: string, fix: string) => new SharedDataError({ folder, detail, fix })

/** The folder is there, a folder, and this user can write in it (a file written and removed). */
const writable = (folder: string, node: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(folder).pipe(Effect.option)
    if (Option.isNone(info)) {
      return yield* problem(folder, "does not exist", "mount the fleet's shared folder (NFS, CephFS, EFS) at this path on every node")
    }
    if (info.value.type !== "Directory") return yield* problem(folder, "is not a folder", "point [cluster] shared_data at the mounted folder")
    const probe = path.join(folder, `.roster-probe-${node}-${crypto.randomBytes(4).toString("hex")}`)
    yield* fs.writeFileString(probe, "").pipe(
      Effect.zipRight(fs.remove(probe)),
      Effect.mapError((e) => problem(folder, `cannot be written (${e.message})`, "mount it read-write for the user the daemon runs as"))
    )
  })

const readMarker = (folder: string) =>
  readJsonOptional(path.join(folder, MARKER)).pipe(
    Effect.map((v) => Option.getOrUndefined(Schema.decodeUnknownOption(Marker)(v))),
    // A marker that cannot be read is no marker: the caller writes its own, or says the folder is not the fleet's.
    Effect.orElseSucceed(() => undefined)
  )

/** The fleet's id in the database, if a node has made one. */
const fleetId = Effect.flatMap(SqlClient, (sql) =>
  sql<{ readonly id: string }>`SELECT id FROM roster_fleet`.pipe(Effect.map((rows) => rows[0]?.id)))

/** Whether the marker names the database's fleet; the fix when it does not. */
const sameFleet = (folder: string, id: string) =>
  Effect.gen(function*() {
    const marker = yield* readMarker(folder)
    if (!marker) {
      return yield* problem(folder, `holds no ${MARKER}, though the fleet exists: it is not the folder the other nodes use`,
        "mount the fleet's shared folder here (the same one on every node)")
    }
    if (marker.fleet !== id) {
      return yield* problem(folder, `belongs to another fleet (${marker.fleet}, made by ${marker.created_by}; this database's is ${id})`,
        "mount this fleet's shared folder here, or point [cluster] database at that fleet's database")
    }
  })

/**
 * What `roster doctor` checks: the folder is writable, and it is the one the fleet's other nodes
 * use (its marker names the database's fleet). Before any node has joined, the first to join
 * makes both.
 */
export const checkSharedData = (folder: string, node: string) =>
  Effect.gen(function*() {
    yield* writable(folder, node)
    const id = yield* fleetId
    if (id === undefined) return { fleet: null } as const
    yield* sameFleet(folder, id)
    return { fleet: id } as const
  })

/**
 * A node joining: the folder checked, and the fleet made by the first node to join — its id in
 * the database and in the folder's marker, in one transaction: a marker that could not be
 * written leaves no fleet behind.
 */
export const claimSharedData = (folder: string, node: string, now: string) =>
  Effect.gen(function*() {
    yield* writable(folder, node)
    const sql = yield* SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`LOCK TABLE roster_fleet IN EXCLUSIVE MODE`
      const id = yield* fleetId
      if (id !== undefined) {
        yield* sameFleet(folder, id)
        return id
      }
      const fresh = `fleet-${crypto.randomBytes(8).toString("hex")}`
      yield* sql`INSERT INTO roster_fleet (id) VALUES (${fresh})`
      yield* writeJson(path.join(folder, MARKER), { fleet: fresh, created_by: node, created_at: now }).pipe(
        Effect.mapError((e) => problem(folder, `the fleet's marker cannot be written (${e.message})`, "mount it read-write for the daemon's user"))
      )
      return fresh
    }))
  })
