/** The channel every node listens on: a task's id each time its row changes. */
export const TASKS_CHANNEL = "roster_tasks"
