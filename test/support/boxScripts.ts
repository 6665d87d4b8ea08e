// Shell the scripted engine runs inside a box (busybox), shared by the suites that drive it.

/** A box action from inside the box (busybox nc, the request through a fifo held open until the answer is in), with the run token: prints the answer's status line. */
export const ACT = `act() { tok=\${HTTP_PROXY#*://}; tok=\${tok%%:*}; rm -f /tmp/.q /tmp/.a; mkfifo /tmp/.q; ` +
  `nc -w 10 host.docker.internal \${ROSTER_GATEWAY##*:} </tmp/.q >/tmp/.a & p=$!; ` +
  `{ printf 'POST /v1/actions/%s HTTP/1.0\\r\\nAuthorization: Bearer %s\\r\\nContent-Length: %s\\r\\n\\r\\n%s' "$1" "$tok" "\${#2}" "$2"; ` +
  `while kill -0 $p 2>/dev/null; do usleep 10000; done; } >/tmp/.q; head -n 1 /tmp/.a | tr -d '\\r'; }; `

/**
 * A run whose every kind of output `worker run` shows: a tool call with its output, an answer with an
 * escape in it, a message_user, a line on stderr, and exit code 5 — for comparing two ways of running it.
 */
export const SHOWN_PROMPT = `!${[
  `{"type":"tool_execution_start","toolName":"bash","args":{"command":"ls"}}`,
  `{"type":"tool_execution_end","toolName":"bash","result":{"content":[{"type":"text","text":"a\\nb\\nc\\nd\\ne"}]}}`,
  `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done \\u001b[2J here"}],"stopReason":"stop"}}`
].map((e) => `echo '${e}'`).join("; ")}; ${ACT}act message_user '{"text":"a note"}' >/dev/null; echo 'to stderr' >&2; exit 5`

/** What `worker run` prints of {@link SHOWN_PROMPT}'s live lines. */
export const SHOWN_LINES = "  -> bash {\"command\":\"ls\"}\n     | a\n     | b\n     | c\n     | … 2 more lines\nalice: done ␛[2J here\n"
