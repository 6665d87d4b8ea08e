/** Does a `scope` list admit this subject? "org/*" is every worker; "org" only host-side callers. */
export const scopeAdmits = (scope: ReadonlyArray<string>, subject: string) =>
  scope.some((s) => s === subject || (s === "org/*" && subject.startsWith("org/")))

/** The subject a worker's box calls the gateway as. */
export const workerSubject = (worker: string) => `org/${worker}`
