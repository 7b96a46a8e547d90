// The ferroclaw web app: chat (Markdown as it streams, tool cards, todos,
// jobs, approvals, stop, images), the conversations sidebar and the operate
// views. Plain JavaScript, no build step; marked renders Markdown, DOMPurify
// sanitizes it, Prism highlights code (all three vendored in /vendor/).
"use strict";

// ---- token, chat id, API ---------------------------------------------------

// The token comes once in the address (#token=...) and is kept in this browser.
const params = new URLSearchParams(location.hash.slice(1));
if (params.get("token")) { localStorage.setItem("ferroclaw.token", params.get("token")); history.replaceState(null, "", location.pathname); }
const token = localStorage.getItem("ferroclaw.token") || prompt("Gateway token") || "";
localStorage.setItem("ferroclaw.token", token);
let chat = localStorage.getItem("ferroclaw.chat") || newChatId();
localStorage.setItem("ferroclaw.chat", chat);

function newChatId() { return "page-" + Math.random().toString(36).slice(2, 10); }

const $ = id => document.getElementById(id);
const log = $("log"), input = $("input"), state = $("state");
// Counters the browser tests read (and `frame`, to show a server frame).
window.ferroclaw = { deltas: 0, replies: 0, historyLoaded: 0, session: null, frame: f => onFrame(f) };

/** Calls the JSON API with the token; throws Error(message) on failure. */
async function api(path, method = "GET", body) {
  const init = { method, headers: { "Authorization": "Bearer " + token } };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const res = await fetch("/api/" + path, init);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function toast(text) {
  const t = $("toast"); t.textContent = text; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

// ---- Markdown --------------------------------------------------------------

window.addEventListener("DOMContentLoaded", () => {
  // Links from the model open elsewhere and never get the page's opener.
  DOMPurify.addHook("afterSanitizeAttributes", node => {
    if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); }
  });
});

/** Sanitized HTML of Markdown `text`: no script, handler or frame survives. */
function markdown(text) {
  const html = marked.parse(text, { gfm: true, breaks: true });
  return DOMPurify.sanitize(html, { FORBID_TAGS: ["style", "form", "input", "button", "textarea"], FORBID_ATTR: ["style"] });
}

/** Renders Markdown into `node`, highlights its code and adds copy buttons. */
function renderInto(node, text) {
  node.innerHTML = markdown(text);
  for (const code of node.querySelectorAll("pre > code")) {
    if (/language-/.test(code.className) && window.Prism) Prism.highlightElement(code);
    const copy = el("button", "copy", "Copy");
    copy.type = "button";
    copy.addEventListener("click", () => {
      const done = () => { copy.textContent = "Copied"; window.ferroclaw.copied = code.textContent; setTimeout(() => { copy.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(code.textContent).then(done, done); else done();
    });
    code.parentElement.prepend(copy);
  }
}

// ---- the chat log ----------------------------------------------------------

let current = null;        // the assistant bubble being streamed
let currentText = "";
let renderPending = false;
const cards = new Map();   // tool call id -> card
let busy = false;          // a turn this page asked for is running
let readOnly = null;       // the session shown read-only, if any

function scrollDown() { log.scrollTop = log.scrollHeight; }

function add(node) { log.appendChild(node); scrollDown(); return node; }

function userBubble(text, images = []) {
  const div = el("div", "msg user");
  div.appendChild(el("div", "text", text));
  for (const src of images) { const img = el("img", "thumb"); img.src = src; img.alt = "attached image"; div.appendChild(img); }
  return add(div);
}

function assistantBubble(text, done) {
  const div = el("div", "msg assistant " + (done ? "done" : "streaming"));
  renderInto(div, text);
  return add(div);
}

function streaming() {
  if (!current) { current = assistantBubble("", false); currentText = ""; }
  return current;
}

function endStream(finalText) {
  if (finalText !== undefined && (current || finalText.trim())) {
    const b = streaming(); renderInto(b, finalText);
  }
  if (current) current.className = "msg assistant done";
  current = null; currentText = "";
}

/** A collapsible card for one tool call. */
function toolCard(id, name, inputValue) {
  const card = el("details", "tool running");
  const summary = el("summary");
  summary.append(el("span", "tool-name", name), el("span", "tool-state", "running…"));
  const body = el("div", "tool-body");
  body.append(el("div", "label", "Input"), el("pre", "tool-input", JSON.stringify(inputValue, null, 2)));
  card.append(summary, body);
  cards.set(id, card);
  return add(card);
}

function finishCard(id, name, isError, ms, preview) {
  const card = cards.get(id) || toolCard(id, name, {});
  card.className = "tool " + (isError ? "failed" : "ok");
  card.querySelector(".tool-state").textContent = (isError ? "✗ error" : "✓") + (ms !== undefined ? " · " + ms + " ms" : "");
  const body = card.querySelector(".tool-body");
  body.append(el("div", "label", isError ? "Error" : "Result"), el("pre", "tool-result", preview || ""));
}

function renderTodos(items) {
  const box = $("todos");
  box.hidden = !items.length;
  box.replaceChildren(el("div", "label", "Todo"));
  for (const t of items) {
    const mark = t.status === "completed" ? "☑" : t.status === "in_progress" ? "◐" : "☐";
    box.appendChild(el("div", "todo " + t.status, mark + " " + (t.content || t.text || t.title || "")));
  }
}

/** The chat's background jobs, as the gateway pushes them (`jobs` frames); running ones count their seconds here. */
let jobs = [];
function renderJobs(list) {
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
async function checkChat(lastReply) {
  try {
    const s = await api("chats/" + encodeURIComponent(chat));
    renderJobs(s.jobs);
    if (s.session !== window.ferroclaw.session && !readOnly) {
      window.ferroclaw.session = s.session;
      log.replaceChildren(); cards.clear();
      if (lastReply) add(el("div", "msg note", lastReply));
    }
  } catch (_) { /* the next answer asks again */ }
}

function setBusy(on) {
  busy = on;
  $("stop").hidden = !on;
}

/** The approval card: Once / Always for this chat / Always for this project / Deny (+ reason). */
function approvalCard(frame) {
  // Shown again when the socket reconnects: one card per request.
  const shown = $("approval-" + frame.id);
  if (shown && !shown.classList.contains("resolved")) return;
  if (shown) shown.remove();
  const card = el("div", "approval");
  card.id = "approval-" + frame.id;
  card.append(el("div", "label", "Approval needed: " + frame.tool), el("div", "summary", frame.summary || ""));
  card.appendChild(el("pre", "tool-input", JSON.stringify(frame.input, null, 2)));
  const reason = el("input", "reason"); reason.placeholder = "Reason (for Deny)";
  const buttons = el("div", "buttons");
  for (const [choice, label] of [["once", "Once"], ["chat", "Always for this chat"], ["project", "Always for this project"], ["deny", "Deny"]]) {
    const b = el("button", "choice-" + choice, label); b.type = "button";
    b.addEventListener("click", () => {
      const msg = { type: "approve", id: frame.id, choice };
      if (choice === "deny" && reason.value.trim()) msg.reason = reason.value.trim();
      sendFrame(msg);
      buttons.querySelectorAll("button").forEach(x => { x.disabled = true; });
    });
    buttons.appendChild(b);
  }
  card.append(reason, buttons);
  add(card);
}

function approvalResolved(frame) {
  const card = $("approval-" + frame.id);
  if (!card) return;
  card.classList.add("resolved");
  card.replaceChildren(el("div", "label", "Approval: " + (frame.outcome || "resolved")));
}

function onEvent(e) {
  if (e.type === "text_delta") {
    window.ferroclaw.deltas++;
    streaming(); currentText += e.text;
    if (!renderPending) {
      renderPending = true;
      requestAnimationFrame(() => { renderPending = false; if (current) { renderInto(current, currentText); scrollDown(); } });
    }
  } else if (e.type === "tool_call_started") {
    endStream(); toolCard(e.id, e.name, e.input);
  } else if (e.type === "tool_call_finished") {
    finishCard(e.id, e.name, e.is_error, e.duration_ms, e.preview);
  } else if (e.type === "todos") {
    renderTodos(e.items || []);
  } else if (e.type === "error" && e.fatal) {
    add(el("div", "msg error", e.message));
  }
}

function onFrame(frame) {
  switch (frame.type) {
    case "ready":
      state.textContent = "connected";
      window.ferroclaw.session = frame.session;
      if (!busy && !readOnly) { loadHistory(frame.session); checkChat(); }
      // A turn asked from this chat (before a reload, or in another tab) still runs.
      if (frame.running && !readOnly) setBusy(true);
      queue.splice(0).forEach(t => socket.send(t));
      break;
    case "event": onEvent(frame.event); break;
    case "reply":
      endStream(frame.content); showMedia(frame.media); window.ferroclaw.replies++; setBusy(false);
      refreshSessions(); checkChat(frame.content);
      break;
    case "message": endStream(); if (frame.content) assistantBubble(frame.content, true); showMedia(frame.media); break;
    case "error": endStream(); add(el("div", "msg error", frame.message)); setBusy(false); break;
    case "approval": approvalCard(frame); break;
    case "jobs": renderJobs(frame.jobs || []); break;
    case "approval_resolved": approvalResolved(frame); break;
  }
}

/** Files the agent sent (the `message` tool's media): pictures shown, others as download links. */
function showMedia(paths) {
  for (const path of paths || []) {
    const name = path.split("/").pop();
    const box = add(el("div", "msg assistant done media"));
    fetch("/api/files?path=" + encodeURIComponent(path), { headers: { "Authorization": "Bearer " + token } })
      .then(async res => {
        if (!res.ok) { const d = await res.json().catch(() => ({})); throw new Error(d.error || res.statusText); }
        const blob = await res.blob();
        const url = URL.createObjectURL(blob);
        if (blob.type.startsWith("image/")) {
          const img = el("img", "sent"); img.src = url; img.alt = name; box.appendChild(img);
        } else {
          const a = el("a", "file", "\u{1F4CE} " + name); a.href = url; a.download = name; box.appendChild(a);
        }
      })
      .catch(e => { box.textContent = name + ": " + e.message; box.classList.add("error"); });
  }
}

/** A picture of a message in the history, put into its bubble (fetched with the token). */
function historyImage(bubble, image) {
  const img = el("img", "thumb"); img.alt = "attached image";
  bubble.appendChild(img);
  fetch(image.src, { headers: { "Authorization": "Bearer " + token } })
    .then(res => { if (!res.ok) throw new Error(res.statusText); return res.blob(); })
    .then(blob => { img.src = URL.createObjectURL(blob); window.ferroclaw.historyImages = (window.ferroclaw.historyImages || 0) + 1; })
    .catch(e => { img.replaceWith(el("span", "hint", "[image: " + e.message + "]")); });
}

/** Shows a conversation's history from its session file. */
let historyGen = 0;
async function loadHistory(session, banner) {
  const gen = ++historyGen;
  const before = new Set(log.children);
  let items = [];
  try { items = session ? (await api("sessions/" + encodeURIComponent(session))).items : []; }
  catch (e) { if (!/no conversation/.test(e.message)) toast(e.message); }
  if (gen !== historyGen) return; // a newer load replaces this one
  // What was sent or received while the history loaded stays, after it.
  const since = [...log.children].filter(c => !before.has(c));
  log.replaceChildren(); cards.clear();
  if (!since.includes(current)) current = null;
  for (const it of items) {
    if (it.kind === "user") { const b = userBubble(it.text); (it.images || []).forEach(im => historyImage(b, im)); }
    else if (it.kind === "assistant") { const b = assistantBubble(it.text, true); (it.images || []).forEach(im => historyImage(b, im)); }
    else if (it.kind === "image" && it.src) historyImage(add(el("div", "msg user")), it);
    else if (it.kind === "media") { if (it.text) assistantBubble(it.text, true); showMedia(it.paths); }
    else if (it.kind === "tool") {
      toolCard(it.id, it.name, it.input);
      if (it.preview !== undefined) finishCard(it.id, it.name, it.is_error, undefined, it.preview);
    }
  }
  log.append(...since);
  const ro = $("readonly");
  ro.hidden = !banner;
  if (banner) $("readonly-text").textContent = banner;
  $("form").hidden = !!banner;
  window.ferroclaw.historyLoaded++;
  scrollDown();
}

// ---- the socket ------------------------------------------------------------

let socket, queue = [];

function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const mine = socket = new WebSocket(scheme + "//" + location.host + "/ws?token=" + encodeURIComponent(token) + "&chat=" + encodeURIComponent(chat));
  mine.onmessage = ev => { if (socket === mine) onFrame(JSON.parse(ev.data)); };
  mine.onclose = () => { if (socket !== mine) return; state.textContent = "disconnected, retrying…"; setTimeout(() => { if (socket === mine) connect(); }, 2000); };
}

function sendFrame(obj) {
  const text = JSON.stringify(obj);
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(text); else queue.push(text);
}

/** Continues the web chat `id` (a new one when none). */
function switchChat(id) {
  chat = id || newChatId();
  localStorage.setItem("ferroclaw.chat", chat);
  readOnly = null; setBusy(false); renderTodos([]); renderJobs([]);
  log.replaceChildren(); $("readonly").hidden = true; $("form").hidden = false;
  state.textContent = "connecting…";
  const old = socket; socket = null; if (old) old.close();
  connect();
  showView("chat"); closeSidebar(); refreshSessions();
}

// ---- composing -------------------------------------------------------------

let pending = []; // images to send: {media_type, data, url}
/** Longest side sent: what providers read without scaling (Anthropic's 1568 px). */
const MAX_IMAGE_SIDE = 1568;
/** A chat socket message is at most 1 MiB: the images of one message share this. */
const MAX_IMAGES_BYTES = 900 * 1024;
const MAX_FILE_BYTES = 20 * 1024 * 1024;

/** Takes an image, scaled down (JPEG) when larger than providers read or than a message holds. */
async function addImage(file) {
  if (!/^image\/(png|jpeg|gif|webp)$/.test(file.type)) { toast("Only PNG, JPEG, GIF or WebP images"); return; }
  if (file.size > MAX_FILE_BYTES) { toast("That image is over 20 MB"); return; }
  let blob = file;
  try {
    const bitmap = await createImageBitmap(file);
    const scale = Math.min(1, MAX_IMAGE_SIDE / Math.max(bitmap.width, bitmap.height));
    if (scale < 1 || file.size > 400 * 1024) {
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(bitmap.width * scale); canvas.height = Math.round(bitmap.height * scale);
      canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
      blob = await new Promise(done => canvas.toBlob(done, "image/jpeg", 0.85));
    }
  } catch (_) { /* not decodable here: sent as it is, if it fits */ }
  const url = await new Promise(done => { const r = new FileReader(); r.onload = () => done(r.result); r.readAsDataURL(blob); });
  const data = url.slice(url.indexOf(",") + 1);
  const used = pending.reduce((n, p) => n + p.data.length, 0);
  if (used + data.length > MAX_IMAGES_BYTES) { toast("That is as many images as one message can carry"); return; }
  pending.push({ media_type: blob.type || file.type, data, url });
  showAttachments();
}

function showAttachments() {
  const box = $("attachments");
  box.replaceChildren();
  pending.forEach((p, i) => {
    const img = el("img", "thumb"); img.src = p.url; img.alt = "image to send"; img.title = "Click to remove";
    img.addEventListener("click", () => { pending.splice(i, 1); showAttachments(); });
    box.appendChild(img);
  });
}

function send() {
  const text = input.value.trim();
  if (!text && !pending.length) return;
  endStream();
  userBubble(text, pending.map(p => p.url));
  const frame = { type: "message", content: text };
  if (pending.length) frame.images = pending.map(p => ({ media_type: p.media_type, data: p.data }));
  sendFrame(frame);
  input.value = ""; pending = []; showAttachments();
  setBusy(true);
}

$("form").addEventListener("submit", ev => { ev.preventDefault(); send(); });
input.addEventListener("keydown", ev => { if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); send(); } });
input.addEventListener("paste", ev => {
  for (const item of ev.clipboardData ? ev.clipboardData.items : []) {
    if (item.kind === "file" && item.type.startsWith("image/")) { ev.preventDefault(); addImage(item.getAsFile()); }
  }
});
$("attach").addEventListener("change", ev => { [...ev.target.files].forEach(addImage); ev.target.value = ""; });
$("stop").addEventListener("click", () => { sendFrame({ type: "stop" }); $("stop").textContent = "Stopping…"; setTimeout(() => { $("stop").textContent = "Stop"; }, 1500); });

// ---- the conversations sidebar ---------------------------------------------

function ago(secs) {
  const d = Date.now() / 1000 - secs;
  if (d < 60) return "now";
  if (d < 3600) return Math.floor(d / 60) + " min";
  if (d < 86400) return Math.floor(d / 3600) + " h";
  return Math.floor(d / 86400) + " d";
}

async function refreshSessions() {
  const q = $("search").value.trim();
  let list;
  try { list = (await api("sessions" + (q ? "?q=" + encodeURIComponent(q) : ""))).sessions; }
  catch (e) { toast(e.message); return; }
  const ul = $("sessions");
  ul.replaceChildren();
  for (const s of list) {
    const li = el("li", "session" + (s.chat === chat && !readOnly ? " current" : "") + (readOnly === s.id ? " current" : ""));
    li.dataset.id = s.id;
    const open = el("button", "open");
    open.append(el("span", "title", s.title || "(empty)"), el("span", "meta", (s.channel || "?") + " · " + ago(s.modified)));
    if (s.snippet) open.appendChild(el("span", "snippet", s.snippet));
    open.addEventListener("click", () => openSession(s));
    const rename = el("button", "rename icon", "✎"); rename.title = "Rename"; rename.type = "button";
    rename.addEventListener("click", async () => {
      const title = prompt("Name this conversation", s.title || "");
      if (title === null) return;
      try { await api("sessions/" + encodeURIComponent(s.id) + "/title", "PUT", { title }); refreshSessions(); } catch (e) { toast(e.message); }
    });
    li.append(open, rename);
    ul.appendChild(li);
  }
}

/** Opens a conversation: a web chat continues it, any other is shown read-only. */
function openSession(s) {
  if (s.chat) { if (s.chat !== chat || readOnly) switchChat(s.chat); else { showView("chat"); closeSidebar(); } return; }
  readOnly = s.id;
  showView("chat"); closeSidebar();
  loadHistory(s.id, `Reading a ${s.channel || ""} conversation (read-only).`).then(refreshSessions);
}

let searchTimer;
$("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(refreshSessions, 250); });
$("new-chat").addEventListener("click", () => switchChat(null));
$("back-to-chat").addEventListener("click", () => switchChat(chat));
$("menu").addEventListener("click", () => document.body.classList.toggle("sidebar-open"));
function closeSidebar() { document.body.classList.remove("sidebar-open"); }

// ---- views -----------------------------------------------------------------

function showView(name) {
  for (const v of ["chat", "operate"]) {
    $("view-" + v).hidden = v !== name;
    $("tab-" + v).classList.toggle("active", v === name);
  }
  if (name === "operate") showPane(showPane.current || "channels");
}
document.querySelectorAll("header .tab").forEach(b => b.addEventListener("click", () => showView(b.dataset.view)));

const panes = { channels: loadChannels, cron: loadCron, pairing: loadPairing, memory: loadMemory, usage: loadUsage, log: loadLog };
function showPane(name) {
  showPane.current = name;
  document.querySelectorAll("#operate-nav button").forEach(b => b.classList.toggle("active", b.dataset.pane === name));
  document.querySelectorAll(".pane").forEach(p => { p.hidden = p.id !== "pane-" + name; });
  panes[name]().catch(e => toast(e.message));
}
document.querySelectorAll("#operate-nav button").forEach(b => b.addEventListener("click", () => showPane(b.dataset.pane)));

function table(headers, rows) {
  const t = el("table");
  const head = el("tr"); headers.forEach(h => head.appendChild(el("th", "", h))); t.appendChild(head);
  for (const r of rows) { const tr = el("tr"); r.forEach(c => { const td = el("td"); if (c instanceof Node) td.appendChild(c); else td.textContent = c ?? ""; tr.appendChild(td); }); t.appendChild(tr); }
  return t;
}

function button(label, cls, onClick) {
  const b = el("button", cls, label); b.type = "button";
  b.addEventListener("click", async () => { b.disabled = true; try { await onClick(); } catch (e) { toast(e.message); } b.disabled = false; });
  return b;
}

async function loadChannels() {
  const s = await api("status");
  $("pane-channels").replaceChildren(
    el("p", "hint", `Model ${s.model} · ${s.turns_running} turn(s) running, ${s.turns_done} done · ${s.live_sessions} chat(s) in memory`),
    table(["Channel", "State", "Who may talk"], s.channels.map(c => [c.name, el("span", "conn " + ((c.connection || {}).state || ""), c.state), c.dm_policy + (c.allow_from ? ` (+${c.allow_from} allowed)` : "")])));
}

async function loadCron() {
  // By default a job's answer comes to the chat open on this page.
  if (!$("cron-deliver").value) $("cron-deliver").value = "web:" + chat;
  const { jobs } = await api("cron");
  const box = $("cron-jobs");
  box.replaceChildren();
  if (!jobs.length) box.appendChild(el("p", "hint", "No jobs yet."));
  for (const j of jobs) {
    const card = el("div", "card job-card" + (j.enabled ? "" : " paused"));
    card.dataset.id = j.id;
    card.append(el("h3", "", j.name + (j.enabled ? "" : " (paused)")), el("div", "explained", j.explained), el("div", "hint", j.schedule + (j.deliver_to ? " → " + j.deliver_to : "")),
      el("div", "", j.message),
      el("div", "hint", `next: ${j.next_run || "—"} · last: ${j.last_run || "never"}${j.last_status ? " (" + j.last_status + ")" : ""}${j.last_error ? " — " + j.last_error : ""}`));
    const buttons = el("div", "buttons");
    buttons.append(
      button("Run now", "run", async () => { await api(`cron/${j.id}/run`, "POST"); toast("Runs within a second"); loadCron(); }),
      button(j.enabled ? "Pause" : "Resume", "pause", async () => { await api(`cron/${j.id}/enabled`, "PUT", { enabled: !j.enabled }); loadCron(); }),
      button("Remove", "remove danger", async () => { if (confirm("Remove " + j.name + "?")) { await api(`cron/${j.id}`, "DELETE"); loadCron(); } }));
    card.appendChild(buttons);
    box.appendChild(card);
  }
}

function scheduleForm() {
  return { kind: $("cron-kind").value, value: $("cron-value").value, tz: $("cron-tz").value || null };
}

let explainTimer;
async function explain() {
  const out = $("cron-explained");
  if (!$("cron-value").value.trim()) { out.textContent = "Type a schedule: it is checked and explained here."; out.className = "hint"; return; }
  try {
    const r = await api("cron/explain", "POST", scheduleForm());
    out.textContent = r.explained + " — next: " + r.next.join(", "); out.className = "hint ok";
  } catch (e) { out.textContent = e.message; out.className = "hint bad"; }
}
["cron-kind", "cron-value", "cron-tz"].forEach(id => $(id).addEventListener("input", () => { clearTimeout(explainTimer); explainTimer = setTimeout(explain, 200); }));
$("cron-kind").addEventListener("change", () => {
  $("cron-value").placeholder = { cron: "0 9 * * 1-5", every: "30m", at: "+1h or 2026-05-01 09:00" }[$("cron-kind").value];
  explain();
});
$("cron-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  try {
    await api("cron", "POST", { name: $("cron-name").value, schedule: scheduleForm(), message: $("cron-message").value, deliver_to: $("cron-deliver").value || null });
    ["cron-name", "cron-value", "cron-message"].forEach(id => { $(id).value = ""; });
    explain(); toast("Job added"); loadCron();
  } catch (e) { toast(e.message); }
});

async function loadPairing() {
  const { channels } = await api("pairing");
  const pane = $("pane-pairing");
  pane.replaceChildren();
  for (const c of channels) {
    const card = el("div", "card");
    card.appendChild(el("h3", "", c.channel));
    if (!c.pending.length) card.appendChild(el("p", "hint", "No pairing requests."));
    for (const p of c.pending) {
      const row = el("div", "pairing-request");
      row.dataset.code = p.code;
      row.append(el("span", "", `${p.name || p.sender} (${p.sender}) · code ${p.code}`),
        button("Approve", "approve", async () => { await api(`pairing/${c.channel}/${p.code}/approve`, "POST"); toast("Approved"); loadPairing(); }),
        button("Deny", "deny danger", async () => { await api(`pairing/${c.channel}/${p.code}/deny`, "POST"); loadPairing(); }));
      card.appendChild(row);
    }
    if (c.approved.length) card.appendChild(el("p", "hint approved", "Approved: " + c.approved.map(a => a.name || a.sender).join(", ")));
    pane.appendChild(card);
  }
}

async function loadMemory() {
  const m = await api("memory");
  for (const which of ["memory", "user"]) {
    $(which + "-text").value = m[which].text;
    $(which + "-count").textContent = `${m[which].text.length} / ${m[which].limit} characters`;
  }
  const { skills, problems } = await api("skills");
  const box = $("skills");
  box.replaceChildren(el("h3", "", "Skills"));
  if (!skills.length) box.appendChild(el("p", "hint", "No skills."));
  for (const s of skills) {
    const d = el("details", "card skill");
    const sum = el("summary"); sum.append(el("b", "", s.name), el("span", "hint", " · " + s.source + " · " + s.description));
    const body = el("div", "md"); renderInto(body, s.body);
    d.append(sum, el("div", "hint", s.path), body);
    box.appendChild(d);
  }
  for (const p of problems) box.appendChild(el("p", "hint bad", p));
}
for (const which of ["memory", "user"]) {
  $(which + "-save").addEventListener("click", async () => {
    try { const r = await api("memory/" + which, "PUT", { text: $(which + "-text").value }); $(which + "-count").textContent = `${r.chars} / ${r.limit} characters`; toast("Saved " + r.file); }
    catch (e) { toast(e.message); }
  });
}

async function loadUsage() {
  const { days } = await api("usage");
  const total = days.reduce((a, d) => a + d.cost_usd, 0);
  $("pane-usage").replaceChildren(
    el("p", "hint", `Last 30 days: about $${total.toFixed(2)}` + (days.some(d => d.some_unpriced) ? " (some models have no known price)" : "")),
    table(["Day (UTC)", "Input tokens", "From cache", "Output tokens", "Cost"], days.map(d => [d.day, d.input_tokens.toLocaleString(), d.cache_read_tokens.toLocaleString(), d.output_tokens.toLocaleString(), "$" + d.cost_usd.toFixed(4)])));
}

async function loadLog() {
  const { text } = await api("log");
  const pre = $("log-text"); pre.textContent = text || "(empty)"; pre.scrollTop = pre.scrollHeight;
}
$("log-refresh").addEventListener("click", () => loadLog().catch(e => toast(e.message)));

// ---- start -----------------------------------------------------------------

window.addEventListener("DOMContentLoaded", () => { connect(); refreshSessions(); });
