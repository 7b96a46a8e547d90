// The web app's basics, used by every other module: the gateway token and
// the JSON API, the conversation this page shows, element helpers, toasts
// and the clipboard.
"use strict";

// The token comes once in the address (#token=...) and is kept in this browser.
const params = new URLSearchParams(location.hash.slice(1));
if (params.get("token")) { localStorage.setItem("ferroclaw.token", params.get("token")); history.replaceState(null, "", location.pathname); }
export const token = localStorage.getItem("ferroclaw.token") || prompt("Gateway token") || "";
localStorage.setItem("ferroclaw.token", token);

export function newChatId() { return "page-" + Math.random().toString(36).slice(2, 10); }

/** The conversation this page shows: the web chat it talks in, the session
 * shown read-only instead (if any), and the first words said in the chat
 * (for the sidebar until the gateway lists it). */
export const conversation = { chat: localStorage.getItem("ferroclaw.chat") || newChatId(), readOnly: null, firstWords: null };
localStorage.setItem("ferroclaw.chat", conversation.chat);

/** The web chat this page talks in. */
export function currentChat() { return conversation.chat; }

export const $ = id => document.getElementById(id);
// Counters the browser tests read (and `frame`, to show a server frame: socket.js).
window.ferroclaw = { deltas: 0, replies: 0, historyLoaded: 0, session: null };

/** Calls the JSON API with the token; throws Error(message) on failure. */
export async function api(path, method = "GET", body) {
  const init = { method, headers: { "Authorization": "Bearer " + token } };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const res = await fetch("/api/" + path, init);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

/** Fetches a file of the gateway's (a picture, a file the agent sent) with the token. */
export function fetchWithToken(url) {
  return fetch(url, { headers: { "Authorization": "Bearer " + token } });
}

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function toast(text) {
  const t = $("toast"); t.textContent = text; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

/** Puts `text` on the clipboard (where the page may), then calls `done`. */
export function copyText(text, done) {
  window.ferroclaw.copied = text;
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done); else done();
}

/** A small button that says "Copied" for a moment after it copied. */
export function flash(button, label) {
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1500);
}
