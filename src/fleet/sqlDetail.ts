import type { SqlError } from "@effect/sql/SqlError"

/** The database's own words when it gave some (the driver's error), else the client's. */
export const sqlDetail = (e: SqlError) => (e.cause instanceof Error ? e.cause.message : e.message)
