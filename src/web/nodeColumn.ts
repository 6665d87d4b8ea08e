import { html } from "./html.js"

/** A Node column's heading and cells, for records of a fleet (each names the node that ran it); nothing on a machine on its own. */
export const nodeColumn = (records: ReadonlyArray<{ readonly node?: string | undefined }>) => {
  const fleet = records.some((r) => r.node !== undefined)
  return {
    head: fleet ? html`<th scope="col">Node</th>` : "",
    cell: (r: { readonly node?: string | undefined }) => (fleet ? html`<td>${r.node ?? "—"}</td>` : "")
  }
}
