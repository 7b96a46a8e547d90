// The conversations sidebar: the list (web chats, API callers' or all),
// search with the matching words marked, renaming, opening one (a web chat
// continues, any other is shown read-only) and starting a new chat.
"use strict";

import { $, el, api, toast, conversation, newChatId } from "/page.js";
import { setBusy, loadHistory } from "/messages.js";
import { renderTodos, renderJobs } from "/live.js";
import { reconnect } from "/socket.js";
import { showView } from "/views.js";

function ago(secs) {
  const d = Date.now() / 1000 - secs;
  if (d < 60) return "now";
  if (d < 3600) return Math.floor(d / 60) + " min";
  if (d < 86400) return Math.floor(d / 3600) + " h";
  return Math.floor(d / 86400) + " d";
}

/** Which conversations the sidebar lists: `chats` (everything but API callers'), `api`, or `all`. */
let listFilter = localStorage.getItem("ferroclaw.filter") || "chats";
const FILTERS = { chats: s => s.channel !== "api", api: s => s.channel === "api", all: () => true };

export function showFilter() {
  document.querySelectorAll("#filter button").forEach(b => b.classList.toggle("active", b.dataset.filter === listFilter));
}
document.querySelectorAll("#filter button").forEach(b => b.addEventListener("click", () => {
  listFilter = FILTERS[b.dataset.filter] ? b.dataset.filter : "chats";
  localStorage.setItem("ferroclaw.filter", listFilter);
  showFilter(); refreshSessions();
}));

/** A search hit's words as the gateway marked them (no brackets). */
function snippetOf(s) {
  const span = el("span", "snippet");
  if (Array.isArray(s.snippet_parts)) for (const p of s.snippet_parts) span.appendChild(p.hit ? el("mark", "", p.text) : document.createTextNode(p.text));
  else span.textContent = s.snippet;
  return span;
}

let listGen = 0;
export async function refreshSessions() {
  const gen = ++listGen;
  const q = $("search").value.trim();
  let list;
  try { list = (await api("sessions" + (q ? "?q=" + encodeURIComponent(q) : ""))).sessions; }
  catch (e) { toast(e.message); return; }
  if (gen !== listGen) return; // a newer list replaces this one
  const { chat, readOnly, firstWords } = conversation;
  list = list.filter(FILTERS[listFilter] || FILTERS.chats);
  // The chat open here shows at once, before the gateway has its conversation.
  if (!q && !readOnly && listFilter !== "api" && !list.some(s => s.chat === chat)) {
    list.unshift({ id: null, chat, channel: "web", title: firstWords || "New chat", modified: Date.now() / 1000 });
  }
  const ul = $("sessions");
  ul.replaceChildren();
  for (const s of list) {
    const li = el("li", "session" + (s.chat === chat && !readOnly ? " current" : "") + (readOnly && readOnly === s.id ? " current" : ""));
    if (s.id) li.dataset.id = s.id;
    const open = el("button", "open");
    open.append(el("span", "title", s.title || "(empty)"), el("span", "meta", (s.channel || "?") + " · " + ago(s.modified)));
    if (s.snippet) open.appendChild(snippetOf(s));
    open.addEventListener("click", () => openSession(s));
    li.appendChild(open);
    if (s.id) li.appendChild(renameButton(s));
    ul.appendChild(li);
  }
}

/** The ✎ button that names a conversation. */
function renameButton(s) {
  const rename = el("button", "rename icon", "✎"); rename.title = "Rename"; rename.type = "button";
  rename.addEventListener("click", async () => {
    const title = prompt("Name this conversation", s.title || "");
    if (title === null) return;
    try { await api("sessions/" + encodeURIComponent(s.id) + "/title", "PUT", { title }); refreshSessions(); } catch (e) { toast(e.message); }
  });
  return rename;
}

/** Opens a conversation: a web chat continues it, any other is shown read-only. */
function openSession(s) {
  if (s.chat) { if (s.chat !== conversation.chat || conversation.readOnly) switchChat(s.chat); else { showView("chat"); closeSidebar(); } return; }
  conversation.readOnly = s.id;
  showView("chat"); closeSidebar();
  loadHistory(s.id, `Reading a ${s.channel || ""} conversation (read-only).`).then(refreshSessions);
}

/** Continues the web chat `id` (a new one when none). */
function switchChat(id) {
  conversation.chat = id || newChatId();
  conversation.firstWords = null;
  localStorage.setItem("ferroclaw.chat", conversation.chat);
  conversation.readOnly = null; setBusy(false); renderTodos([]); renderJobs([]);
  $("log").replaceChildren(); $("readonly").hidden = true; $("form").hidden = false;
  reconnect();
  showView("chat"); closeSidebar(); refreshSessions();
}

let searchTimer;
$("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(refreshSessions, 250); });
$("new-chat").addEventListener("click", () => switchChat(null));
$("back-to-chat").addEventListener("click", () => switchChat(conversation.chat));
$("menu").addEventListener("click", () => document.body.classList.toggle("sidebar-open"));
function closeSidebar() { document.body.classList.remove("sidebar-open"); }
