// The chat log: user and assistant messages (with their time, copy,
// regenerate and edit), the answer as it streams, tool cards, files the
// agent sent, a conversation's history, and which of this page's messages
// still wait for an answer.
"use strict";

import { $, el, toast, api, fetchWithToken, copyText, flash } from "/page.js";
import { renderInto } from "/markdown.js";
import { send } from "/composer.js";

const log = $("log"), input = $("input");

let current = null;        // the assistant message being streamed
let currentText = "";
let renderPending = false;
const cards = new Map();   // tool call id -> card

/** This page's messages that are not answered yet (`outstanding`), and
 * those sent while an answer was still coming (`waiting`): shown after it,
 * in the order the chat answers them. */
export const turns = { outstanding: 0, waiting: [] };

export function scrollDown() { log.scrollTop = log.scrollHeight; }

/** Empties the log (a new conversation, or one about to be shown). */
export function clearLog() { log.replaceChildren(); cards.clear(); }

/** Adds `node` to the log: before the messages still waiting their turn, so the answer being written stays above them. */
export function add(node) {
  const waiting = turns.waiting;
  if (waiting.length && waiting[0].parentElement === log) log.insertBefore(node, waiting[0]); else log.appendChild(node);
  scrollDown();
  return node;
}

/** Adds a message of ours that waits below the answer still coming. */
export function addWaiting(box) {
  box.classList.add("queued"); log.appendChild(box); turns.waiting.push(box); scrollDown();
}

export function setBusy(on) {
  if (!on) { turns.outstanding = 0; turns.waiting.splice(0).forEach(placed); }
  $("stop").hidden = !on;
}

/** One of this page's messages was answered (or refused): the next waiting one takes its place. */
export function answered() {
  turns.outstanding = Math.max(0, turns.outstanding - 1);
  const next = turns.waiting.shift();
  if (next) placed(next);
  if (!turns.outstanding) setBusy(false);
}

function placed(box) { box.classList.remove("queued"); }

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

export function userBubble(text, images = [], at) {
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

export function assistantBubble(text, done, at) {
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

/** Adds streamed text to the answer being written, rendered once per frame. */
export function streamText(text) {
  streaming(); currentText += text;
  if (!renderPending) {
    renderPending = true;
    requestAnimationFrame(() => { renderPending = false; if (current) { renderInto(current.querySelector(".body"), currentText); current.raw = currentText; scrollDown(); } });
  }
}

export function endStream(finalText) {
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

/** A tool call started: the answer so far ends and the call's card follows it. */
export function toolCallStarted(e) {
  endStream();
  const card = toolCard(e.id, e.name, e.input);
  // The request to approve it may have come first: the call goes above its request.
  const asked = [...log.querySelectorAll(".approval:not(.resolved):not(.placed)")]
    .find(a => a.dataset.tool === e.name && (a.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING));
  if (asked) { log.insertBefore(card, asked); asked.classList.add("placed"); }
}

export function finishCard(id, name, isError, ms, preview) {
  const card = cards.get(id) || toolCard(id, name, {});
  card.className = "tool " + (isError ? "failed" : "ok");
  card.querySelector(".tool-state").textContent = (isError ? "✗ error" : "✓") + (ms !== undefined ? " · " + ms + " ms" : "");
  const body = card.querySelector(".tool-body");
  body.append(el("div", "label", isError ? "Error" : "Result"), el("pre", "tool-result", preview || ""));
}

/** Files the agent sent (the `message` tool's media): pictures shown, others as download links. */
export function showMedia(paths) {
  for (const path of paths || []) {
    const name = path.split("/").pop();
    const box = add(el("div", "msg assistant done media"));
    fetchWithToken("/api/files?path=" + encodeURIComponent(path))
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
  fetchWithToken(image.src)
    .then(res => { if (!res.ok) throw new Error(res.statusText); return res.blob(); })
    .then(blob => { img.src = URL.createObjectURL(blob); window.ferroclaw.historyImages = (window.ferroclaw.historyImages || 0) + 1; })
    .catch(e => { img.replaceWith(el("span", "hint", "[image: " + e.message + "]")); });
}

/** Shows a conversation's history from its session file. */
let historyGen = 0;
export async function loadHistory(session, banner) {
  const gen = ++historyGen;
  const before = new Set(log.children);
  let items = [];
  try { items = session ? (await api("sessions/" + encodeURIComponent(session))).items : []; }
  catch (e) { if (!/no conversation/.test(e.message)) toast(e.message); }
  if (gen !== historyGen) return; // a newer load replaces this one
  // What was sent or received while the history loaded stays, after it.
  const since = [...log.children].filter(c => !before.has(c));
  clearLog();
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
