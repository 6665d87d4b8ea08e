import { visible } from "../report/terminal.js"

/** Every way text can end a line: LF, CR, VT, FF, NEL, and Unicode's line and paragraph separators. */
const BREAKS = /[ \t]*(?:\r\n|[\n\r\u000b\u000c\u0085\u2028\u2029])[ \t]*/g

/**
 * Box- or person-written text that must stay one line of a prompt (a memory entry, a chat
 * author, a line of a room's history): every line terminator becomes a space, and every other
 * control character and bidirectional control a visible stand-in (as on a terminal), so an entry
 * can never forge a heading, a memory line or a reordered sentence of the prompt around it.
 */
export const promptLine = (text: string) => visible(text.replace(BREAKS, " ").replace(/\t/g, " "))

/**
 * Box- or person-written text that may run over lines in a prompt (a task's prompt, a message, a
 * delivered answer): every line terminator becomes a newline — a separator the model reads the
 * way the reader sees it — and every other control character and bidirectional control a
 * visible stand-in.
 */
export const promptBlock = (text: string) => visible(text.replace(/\r\n|[\r\u000b\u000c\u0085\u2028\u2029]/g, "\n"))
