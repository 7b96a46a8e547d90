// What the chat is doing now, above the composer: the model's todo list and
// the chat's background jobs (running ones count their seconds here).
"use strict";

import { $, el, api, conversation } from "/page.js";
import { add, clearLog } from "/messages.js";

export function renderTodos(items) {
  const box = $("todos");
  box.hidden = !items.length;
  box.replaceChildren(el("div", "label", "Todo"));
  for (const t of items) {
    const mark = t.status === "completed" ? "☑" : t.status === "in_progress" ? "◐" : "☐";
    box.appendChild(el("div", "todo " + t.status, mark + " " + (t.content || t.text || t.title || "")));
  }
}

/** The chat's background jobs, as the gateway pushes them (`jobs` frames). */
let jobs = [];
export function renderJobs(list) {
  const now = Date.now();
  jobs = list.map(j => ({ ...j, since: now - j.elapsed_secs * 1000 }));
  drawJobs();
}
function drawJobs() {
  const box = $("jobs");
  box.hidden = !jobs.length;
  box.replaceChildren(el("div", "label", "Background jobs"));
  for (const j of jobs) {
    const secs = j.status === "running" ? Math.floor((Date.now() - j.since) / 1000) : j.elapsed_secs;
    box.appendChild(el("div", "job " + j.status, `${j.status} · ${secs}s · ${j.command}`));
  }
}
setInterval(() => { if (jobs.some(j => j.status === "running")) drawJobs(); }, 1000);

/** After an answer: the chat's jobs, and a new conversation (`/new`) noticed. */
export async function checkChat(lastReply) {
  try {
    const s = await api("chats/" + encodeURIComponent(conversation.chat));
    renderJobs(s.jobs);
    if (s.session !== window.ferroclaw.session && !conversation.readOnly) {
      window.ferroclaw.session = s.session;
      clearLog();
      if (lastReply) add(el("div", "msg note", lastReply));
    }
  } catch (_) { /* the next answer asks again */ }
}
