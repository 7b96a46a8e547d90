// The chat's WebSocket (`/ws`): connecting (again after a drop), frames out
// (queued while the socket is away) and every frame in, handed to the part
// of the page it is for.
"use strict";

import { $, el, token, conversation } from "/page.js";
import {
  turns, add, clearLog, setBusy, answered, streamText, endStream, toolCallStarted, finishCard,
  assistantBubble, showMedia, loadHistory,
} from "/messages.js";
import { renderTodos, renderJobs, checkChat } from "/live.js";
import { approvalCard, approvalResolved } from "/approvals.js";
import { showModels } from "/composer.js";
import { refreshSessions } from "/sidebar.js";

let socket, queue = [];
// The browser tests show a server frame with `window.ferroclaw.frame(...)`.
window.ferroclaw.frame = f => onFrame(f);

export function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const mine = socket = new WebSocket(scheme + "//" + location.host + "/ws?token=" + encodeURIComponent(token) + "&chat=" + encodeURIComponent(conversation.chat));
  mine.onmessage = ev => { if (socket === mine) onFrame(JSON.parse(ev.data)); };
  mine.onclose = () => { if (socket !== mine) return; setState("disconnected, retrying…", "down"); setTimeout(() => { if (socket === mine) connect(); }, 2000); };
}

/** Drops the socket of the chat this page left and connects for the one it shows now. */
export function reconnect() {
  setState("connecting…", "");
  const old = socket; socket = null; retire(old);
  connect();
}

/** Closes a socket this page no longer uses; one still opening closes once open (closing it earlier is an error in the console). */
function retire(old) {
  if (!old) return;
  if (old.readyState === WebSocket.CONNECTING) { old.onmessage = null; old.onopen = () => old.close(); } else old.close();
}

export function sendFrame(obj) {
  const text = JSON.stringify(obj);
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(text); else queue.push(text);
}

/** The connection as the header shows it: `connected`, `connecting…`, `disconnected, retrying…`. */
function setState(text, kind) { const state = $("state"); state.textContent = text; state.className = kind; }

function onFrame(frame) {
  switch (frame.type) {
    case "ready": onReady(frame); break;
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

/** The socket is (again) open on the chat: its history, whether a turn of it still runs, and what was written while away. */
function onReady(frame) {
  setState("connected", "up");
  window.ferroclaw.session = frame.session;
  showModels(frame.models || []);
  if (!turns.outstanding && !conversation.readOnly) {
    // A new chat has no history to ask for.
    if (frame.history) loadHistory(frame.session); else { clearLog(); window.ferroclaw.historyLoaded++; }
    checkChat();
  }
  if (!conversation.readOnly) {
    // Messages written while the socket was away go now: they wait for answers.
    const unsent = queue.filter(t => JSON.parse(t).type === "message").length;
    if (frame.running) {
      // A turn asked from this chat (before a reload, or in another tab) still runs.
      turns.outstanding = Math.max(turns.outstanding - unsent, 1) + unsent; setBusy(true);
    } else {
      // Nothing of this chat is being answered: nothing here waits for it.
      setBusy(false); turns.outstanding = unsent; if (unsent) setBusy(true);
    }
  }
  queue.splice(0).forEach(t => socket.send(t));
}

/** One event of the turn being answered. */
function onEvent(e) {
  if (e.type === "text_delta") {
    window.ferroclaw.deltas++;
    streamText(e.text);
  } else if (e.type === "tool_call_started") {
    toolCallStarted(e);
  } else if (e.type === "tool_call_finished") {
    finishCard(e.id, e.name, e.is_error, e.duration_ms, e.preview);
  } else if (e.type === "todos") {
    renderTodos(e.items || []);
  } else if (e.type === "error" && e.fatal) {
    add(el("div", "msg error", e.message));
  }
}
