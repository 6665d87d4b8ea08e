// roster web: the page's one script, served from roster itself (the Content-Security-Policy
// allows no other and no inline code). A live part of a page is replaced with the fragment the
// server rendered — escaped there, so box text is always text.
"use strict"

const live = document.querySelector("[data-live=now]")
if (live) {
  const events = new EventSource("/events")
  events.addEventListener("now", (e) => {
    live.innerHTML = JSON.parse(e.data).html
  })
}

const talk = document.querySelector("[data-live=talk]")
if (talk) {
  const typing = document.getElementById("typing")
  const events = new EventSource(`/talk/${talk.dataset.id}/events`)
  events.addEventListener("log", (e) => {
    talk.innerHTML = JSON.parse(e.data).html
    typing.textContent = ""
  })
  // The reply as it streams: text only (textContent), replaced by the escaped log when the turn ends.
  events.addEventListener("delta", (e) => {
    typing.textContent += JSON.parse(e.data).text
  })
}

// Forms that act on a conversation are sent without leaving the page (the event stream stays open).
for (const form of document.querySelectorAll("form[data-async]")) {
  form.addEventListener("submit", (e) => {
    e.preventDefault()
    fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), headers: { "x-requested-with": "fetch" } })
      .then(() => {
        const text = form.querySelector("textarea")
        if (text) text.value = ""
      })
  })
}
