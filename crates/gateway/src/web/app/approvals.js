// Approval requests in the chat: a card with Once / Always for this chat /
// Always for this project / Deny (with a reason), answered on the socket,
// and its outcome once the gateway resolved it.
"use strict";

import { $, el } from "/page.js";
import { add } from "/messages.js";
import { sendFrame } from "/socket.js";

/** The approval card for a request (`approval` frame). */
export function approvalCard(frame) {
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

/** A request was answered (here, in another tab or channel) or timed out (`approval_resolved` frame). */
export function approvalResolved(frame) {
  const card = $("approval-" + frame.id);
  if (!card) return;
  card.classList.add("resolved");
  card.replaceChildren(el("div", "label", "Approval: " + (frame.outcome || "resolved")));
}
