/** `worker run`'s words after `run` as the program reads them, or undefined for anything the program must read itself. */
export declare const readRunArgs: (words: ReadonlyArray<string>) =>
  | { readonly worker: string; readonly prompt: string; readonly ceiling_min?: number; readonly channel: string | null }
  | undefined
/** `worker run <words>` through the daemon; false when it did not start there. */
export declare const handOff: (words: ReadonlyArray<string>, build: string | undefined) => Promise<boolean>
