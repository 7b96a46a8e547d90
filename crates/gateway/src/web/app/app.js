// The ferroclaw web app: chat (Markdown as it streams, tool cards, todos,
// jobs, approvals, stop, images, per-message copy / regenerate / edit, a
// model picker) and the conversations sidebar; the operate views are in
// operate.js. Plain JavaScript modules, no build step; marked renders
// Markdown, DOMPurify sanitizes it, Prism highlights code (all three
// vendored in /vendor/).
"use strict";

// ---- token, chat id, API ---------------------------------------------------

// The token comes once in the address (#token=...) and is kept in this browser.
const params = new URLSearchParams(location.hash.slice(1));
if (params.get("token")) { localStorage.setItem("ferroclaw.token", params.get("token")); history.replaceState(null, "", location.pathname); }
const token = localStorage.getItem("ferroclaw.token") || prompt("Gateway token") || "";
localStorage.setItem("ferroclaw.token", token);
let chat = localStorage.getItem("ferroclaw.chat") || newChatId();
localStorage.setItem("ferroclaw.chat", chat);

/** The web chat this page talks in. */
export function currentChat() { return chat; }

function newChatId() { return "page-" + Math.random().toString(36).slice(2, 10); }

export const $ = id => document.getElementById(id);
const log = $("log"), input = $("input"), state = $("state");
// Counters the browser tests read (and `frame`, to show a server frame).
window.ferroclaw = { deltas: 0, replies: 0, historyLoaded: 0, session: null, frame: f => onFrame(f) };

/** Calls the JSON API with the token; throws Error(message) on failure. */
export async function api(path, method = "GET", body) {
  const init = { method, headers: { "Authorization": "Bearer " + token } };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const res = await fetch("/api/" + path, init);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
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
function copyText(text, done) {
  window.ferroclaw.copied = text;
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done); else done();
}

/** A small button that says "Copied" for a moment after it copied. */
function flash(button, label) {
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1500);
}

// ---- Markdown --------------------------------------------------------------

window.addEventListener("DOMContentLoaded", () => {
  // Links from the model open elsewhere and never get the page's opener;
  // a task list's boxes show as written and cannot be clicked.
  DOMPurify.addHook("afterSanitizeAttributes", node => {
    if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); }
    if (node.tagName === "INPUT") { node.setAttribute("disabled", ""); node.removeAttribute("name"); node.removeAttribute("value"); }
  });
  // The only input that survives is a task list's checkbox.
  DOMPurify.addHook("uponSanitizeElement", (node, data) => {
    if (data.tagName === "input" && (node.getAttribute("type") || "").toLowerCase() !== "checkbox") node.remove();
  });
});

/** Sanitized HTML of Markdown `text`: no script, handler or frame survives. */
function markdown(text) {
  const html = marked.parse(text, { gfm: true, breaks: true });
  return DOMPurify.sanitize(html, { FORBID_TAGS: ["style", "form", "button", "textarea", "select"], FORBID_ATTR: ["style"] });
}

/** Renders Markdown into `node`, highlights its code and gives each block a header with its language and a copy button (above the code, never over it). */
export function renderInto(node, text) {
  node.innerHTML = markdown(text);
  for (const code of node.querySelectorAll("pre > code")) {
    if (/language-/.test(code.className) && window.Prism) Prism.highlightElement(code);
    const head = el("div", "code-head");
    const lang = (code.className.match(/language-([\w+#-]+)/) || [])[1] || "";
    const copy = el("button", "copy", "Copy");
    copy.type = "button";
    copy.addEventListener("click", () => copyText(code.textContent, () => flash(copy, "Copy")));
    head.append(el("span", "lang", lang), copy);
    code.parentElement.prepend(head);
  }
  for (const box of node.querySelectorAll("li > input[type=checkbox]")) box.parentElement.classList.add("task");
}

// ---- the chat log ----------------------------------------------------------

let current = null;        // the assistant message being streamed
let currentText = "";
let renderPending = false;
const cards = new Map();   // tool call id -> card
let outstanding = 0;       // messages this page sent that are not answered yet
let readOnly = null;       // the session shown read-only, if any
/** Messages sent while an answer was still coming: shown after it, in the order the chat answers them. */
const waiting = [];

function scrollDown() { log.scrollTop = log.scrollHeight; }

/** Adds `node` to the log: before the messages still waiting their turn, so the answer being written stays above them. */
function add(node) {
  if (waiting.length && waiting[0].parentElement === log) log.insertBefore(node, waiting[0]); else log.appendChild(node);
  scrollDown();
  return node;
}

/** "14:05", and the full date on hover. */
function timeOf(ms) {
  const d = new Date(ms), t = el("time", "", String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0"));
  t.dateTime = d.toISOString(); t.title = d.toLocaleString();
  return t;
}

/** A small action under a message. */
function action(cls, label, onClick) {
  const b = el("button", cls, label); b.type = "button"; b.title = label;
  b.addEventListener("click", () => onClick(b));
  return b;
}

/** One message of the log: the bubble, then its time and actions. */
function entry(kind, bubble, at, actions) {
  const box = el("div", "entry " + kind);
  const meta = el("div", "meta");
  meta.appendChild(timeOf(at || Date.now()));
  const row = el("span", "actions"); row.append(...actions); meta.appendChild(row);
  box.append(bubble, meta);
  return box;
}

function userBubble(text, images = [], at) {
  const div = el("div", "msg user");
  div.appendChild(el("div", "text", text));
  for (const src of images) { const img = el("img", "thumb"); img.src = src; img.alt = "attached image"; div.appendChild(img); }
  const box = entry("user", div, at, [
    action("copy-message", "Copy", b => copyText(text, () => flash(b, "Copy"))),
    action("edit", "Edit", () => { input.value = text; input.focus(); input.setSelectionRange(text.length, text.length); }),
  ]);
  box.question = text;
  return box;
}

function assistantBubble(text, done, at) {
  const div = el("div", "msg assistant " + (done ? "done" : "streaming"));
  const body = el("div", "body"); div.appendChild(body);
  renderInto(body, text);
  const box = entry("assistant", div, at, [
    action("copy-message", "Copy", b => copyText(box.raw, () => flash(b, "Copy"))),
    action("regenerate", "Regenerate", () => regenerate(box)),
  ]);
  box.raw = text;
  return add(box);
}

/** Asks again the question this answer follows (the earlier answer stays in the history). */
function regenerate(answer) {
  let at = answer.previousElementSibling;
  while (at && at.question === undefined) at = at.previousElementSibling;
  if (!at) { toast("No question before this answer"); return; }
  send(at.question);
}

function streaming() {
  if (!current) { current = assistantBubble("", false); currentText = ""; }
  return current;
}

function bubbleOf(box) { return box.querySelector(".msg"); }

function endStream(finalText) {
  if (finalText !== undefined && (current || finalText.trim())) {
    const b = streaming(); renderInto(b.querySelector(".body"), finalText); b.raw = finalText;
  }
  if (current) { bubbleOf(current).className = "msg assistant done"; if (finalText === undefined) current.raw = currentText; }
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
  if (!on) { outstanding = 0; waiting.splice(0).forEach(placed); }
  $("stop").hidden = !on;
}

/** One of this page's messages was answered (or refused): the next waiting one takes its place. */
function answered() {
  outstanding = Math.max(0, outstanding - 1);
  const next = waiting.shift();
  if (next) placed(next);
  if (!outstanding) setBusy(false);
}

function placed(box) { box.classList.remove("queued"); }

/** The approval card: Once / Always for this chat / Always for this project / Deny (+ reason). */
function approvalCard(frame) {
  // Shown again when the socket reconnects: one card per request.
  const shown = $("approval-" + frame.id);
  if (shown && !shown.classList.contains("resolved")) return;
  if (shown) shown.remove();
  const card = el("div", "approval");
  card.id = "approval-" + frame.id; card.dataset.tool = frame.tool;
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
      requestAnimationFrame(() => { renderPending = false; if (current) { renderInto(current.querySelector(".body"), currentText); current.raw = currentText; scrollDown(); } });
    }
  } else if (e.type === "tool_call_started") {
    endStream();
    const card = toolCard(e.id, e.name, e.input);
    // The request to approve it may have come first: the call goes above its request.
    const asked = [...log.querySelectorAll(".approval:not(.resolved):not(.placed)")]
      .find(a => a.dataset.tool === e.name && (a.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING));
    if (asked) { log.insertBefore(card, asked); asked.classList.add("placed"); }
  } else if (e.type === "tool_call_finished") {
    finishCard(e.id, e.name, e.is_error, e.duration_ms, e.preview);
  } else if (e.type === "todos") {
    renderTodos(e.items || []);
  } else if (e.type === "error" && e.fatal) {
    add(el("div", "msg error", e.message));
  }
}

/** The connection as the header shows it: `connected`, `connecting…`, `disconnected, retrying…`. */
function setState(text, kind) { state.textContent = text; state.className = kind; }

function onFrame(frame) {
  switch (frame.type) {
    case "ready":
      setState("connected", "up");
      window.ferroclaw.session = frame.session;
      showModels(frame.models || []);
      if (!outstanding && !readOnly) {
        // A new chat has no history to ask for.
        if (frame.history) loadHistory(frame.session); else { log.replaceChildren(); cards.clear(); window.ferroclaw.historyLoaded++; }
        checkChat();
      }
      if (!readOnly) {
        // Messages written while the socket was away go now: they wait for answers.
        const unsent = queue.filter(t => JSON.parse(t).type === "message").length;
        if (frame.running) {
          // A turn asked from this chat (before a reload, or in another tab) still runs.
          outstanding = Math.max(outstanding - unsent, 1) + unsent; setBusy(true);
        } else {
          // Nothing of this chat is being answered: nothing here waits for it.
          setBusy(false); outstanding = unsent; if (unsent) setBusy(true);
        }
      }
      queue.splice(0).forEach(t => socket.send(t));
      break;
    case "event": onEvent(frame.event); break;
    case "reply":
      endStream(frame.content); showMedia(frame.media); window.ferroclaw.replies++; answered();
      refreshSessions(); checkChat(frame.content);
      break;
    case "message": endStream(); if (frame.content) assistantBubble(frame.content, true); showMedia(frame.media); break;
    case "error": endStream(); add(el("div", "msg error", frame.message)); answered(); break;
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
    const at = it.at ? it.at * 1000 : undefined;
    if (it.kind === "user") { const b = add(userBubble(it.text, [], at)); (it.images || []).forEach(im => historyImage(bubbleOf(b), im)); }
    else if (it.kind === "assistant") { const b = assistantBubble(it.text, true, at); (it.images || []).forEach(im => historyImage(bubbleOf(b), im)); }
    else if (it.kind === "image" && it.src) historyImage(add(el("div", "msg user")), it);
    else if (it.kind === "media") { if (it.text) assistantBubble(it.text, true, at); showMedia(it.paths); }
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
  mine.onclose = () => { if (socket !== mine) return; setState("disconnected, retrying…", "down"); setTimeout(() => { if (socket === mine) connect(); }, 2000); };
}

/** Closes a socket this page no longer uses; one still opening closes once open (closing it earlier is an error in the console). */
function retire(old) {
  if (!old) return;
  if (old.readyState === WebSocket.CONNECTING) { old.onmessage = null; old.onopen = () => old.close(); } else old.close();
}

function sendFrame(obj) {
  const text = JSON.stringify(obj);
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(text); else queue.push(text);
}

/** Continues the web chat `id` (a new one when none). */
function switchChat(id) {
  chat = id || newChatId();
  firstWords = null;
  localStorage.setItem("ferroclaw.chat", chat);
  readOnly = null; setBusy(false); renderTodos([]); renderJobs([]);
  log.replaceChildren(); $("readonly").hidden = true; $("form").hidden = false;
  setState("connecting…", "");
  const old = socket; socket = null; retire(old);
  connect();
  showView("chat"); closeSidebar(); refreshSessions();
}

// ---- the model picker --------------------------------------------------------

/** The models a message may name (the gateway's own first, then `[channels.web] models`); hidden when there is one. */
function showModels(models) {
  const pick = $("model");
  const chosen = localStorage.getItem("ferroclaw.model");
  pick.replaceChildren(...models.map(m => { const o = el("option", "", m.id); o.value = m.id; o.title = m.spec || ""; return o; }));
  if (models.some(m => m.id === chosen)) pick.value = chosen;
  pick.hidden = models.length < 2;
}
$("model").addEventListener("change", () => localStorage.setItem("ferroclaw.model", $("model").value));

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

/** The first words said in this chat, for the sidebar until the gateway lists it. */
let firstWords = null;

/** Sends `text` (the box's, when not given) and the pictures waiting. While an answer is still coming the message waits below it. */
function send(given) {
  const text = given !== undefined ? given : input.value.trim();
  if (!text && !pending.length) return;
  // An answer to an approval gets no reply of its own: it never waits.
  const decision = /^\/(approve|deny)\b/i.test(text);
  const box = userBubble(text, pending.map(p => p.url));
  if (outstanding && !decision) { box.classList.add("queued"); log.appendChild(box); waiting.push(box); scrollDown(); }
  else { endStream(); add(box); }
  const frame = { type: "message", content: text };
  if (pending.length) frame.images = pending.map(p => ({ media_type: p.media_type, data: p.data }));
  if (!$("model").hidden) frame.model = $("model").value;
  sendFrame(frame);
  if (given === undefined) { input.value = ""; pending = []; showAttachments(); }
  if (!decision) { outstanding++; setBusy(true); }
  if (!firstWords) { firstWords = text; refreshSessions(); }
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

/** Which conversations the sidebar lists: `chats` (everything but API callers'), `api`, or `all`. */
let listFilter = localStorage.getItem("ferroclaw.filter") || "chats";
const FILTERS = { chats: s => s.channel !== "api", api: s => s.channel === "api", all: () => true };

function showFilter() {
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
async function refreshSessions() {
  const gen = ++listGen;
  const q = $("search").value.trim();
  let list;
  try { list = (await api("sessions" + (q ? "?q=" + encodeURIComponent(q) : ""))).sessions; }
  catch (e) { toast(e.message); return; }
  if (gen !== listGen) return; // a newer list replaces this one
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
    if (s.id) {
      const rename = el("button", "rename icon", "✎"); rename.title = "Rename"; rename.type = "button";
      rename.addEventListener("click", async () => {
        const title = prompt("Name this conversation", s.title || "");
        if (title === null) return;
        try { await api("sessions/" + encodeURIComponent(s.id) + "/title", "PUT", { title }); refreshSessions(); } catch (e) { toast(e.message); }
      });
      li.appendChild(rename);
    }
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
  if (viewOpened[name]) viewOpened[name]();
}
/** What a view does when it opens (the operate views fill this in: operate.js). */
export const viewOpened = {};
document.querySelectorAll("header .tab").forEach(b => b.addEventListener("click", () => showView(b.dataset.view)));

// ---- start -----------------------------------------------------------------

window.addEventListener("DOMContentLoaded", () => { showFilter(); connect(); refreshSessions(); });
