export declare const officialNode: (version: string) => string
export declare const unflooredBin: (root: string) => string
export declare const binFlags: (root: string) => ReadonlyArray<string>
export declare const CA_BUNDLE: string
export declare const dropUnfloored: (bin: string) => void
