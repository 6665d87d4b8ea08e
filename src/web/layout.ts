import { VERSION } from "../contract/version.js"
import { html, type Html } from "./html.js"

const NAV = [["/", "Now"], ["/runs", "Runs"], ["/tasks", "Tasks"], ["/workers", "Workers"], ["/talk", "Talk"], ["/gateway", "Gateway"]] as const

/**
 * A page: the nav, the body, the session's CSRF token for its forms and scripts, and only
 * same-origin assets (the Content-Security-Policy allows nothing else).
 */
export const page = (title: string, current: string, body: Html, csrf: string) =>
  html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf" content="${csrf}">
<title>${title} · roster</title>
<link rel="stylesheet" href="/assets/style.css">
<link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
<script src="/assets/app.js" defer></script>
</head>
<body>
<header>
<a class="brand" href="/">roster</a>
<nav aria-label="pages">${NAV.map(([href, name]) => html`<a href="${href}"${current === href ? html` aria-current="page"` : ""}>${name}</a>`)}</nav>
<span class="version">v${VERSION}</span>
</header>
<main id="main">
<h1>${title}</h1>
${body}
</main>
</body>
</html>
`

/** The login page: the only page served without a session. */
export const loginPage = (message: string | null) =>
  html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Log in · roster</title><link rel="stylesheet" href="/assets/style.css">
<link rel="icon" href="/assets/icon.svg" type="image/svg+xml"></head>
<body>
<main id="main">
<h1>roster</h1>
${message ? html`<p class="error" role="alert">${message}</p>` : ""}
<form method="post" action="/login">
<label for="token">Login token (roster web prints it)</label>
<input id="token" name="token" type="password" autocomplete="off" required>
<button type="submit">Log in</button>
</form>
</main>
</body>
</html>
`
