// Writing a message: the text box (Enter sends), pictures attached or
// pasted (scaled down to what providers read), the model picker, and Stop.
"use strict";

import { $, el, toast, conversation } from "/page.js";
import { turns, add, addWaiting, endStream, setBusy, userBubble } from "/messages.js";
import { sendFrame } from "/socket.js";
import { refreshSessions } from "/sidebar.js";

const input = $("input");

// ---- the model picker --------------------------------------------------------

/** The models a message may name (the gateway's own first, then `[channels.web] models`); hidden when there is one. */
export function showModels(models) {
  const pick = $("model");
  const chosen = localStorage.getItem("ferroclaw.model");
  pick.replaceChildren(...models.map(m => { const o = el("option", "", m.id); o.value = m.id; o.title = m.spec || ""; return o; }));
  if (models.some(m => m.id === chosen)) pick.value = chosen;
  pick.hidden = models.length < 2;
}
$("model").addEventListener("change", () => localStorage.setItem("ferroclaw.model", $("model").value));

// ---- pictures ----------------------------------------------------------------

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

// ---- sending -----------------------------------------------------------------

/** Sends `text` (the box's, when not given) and the pictures waiting. While an answer is still coming the message waits below it. */
export function send(given) {
  const text = given !== undefined ? given : input.value.trim();
  if (!text && !pending.length) return;
  // An answer to an approval gets no reply of its own: it never waits.
  const decision = /^\/(approve|deny)\b/i.test(text);
  const box = userBubble(text, pending.map(p => p.url));
  if (turns.outstanding && !decision) addWaiting(box);
  else { endStream(); add(box); }
  const frame = { type: "message", content: text };
  if (pending.length) frame.images = pending.map(p => ({ media_type: p.media_type, data: p.data }));
  if (!$("model").hidden) frame.model = $("model").value;
  sendFrame(frame);
  if (given === undefined) { input.value = ""; pending = []; showAttachments(); }
  if (!decision) { turns.outstanding++; setBusy(true); }
  if (!conversation.firstWords) { conversation.firstWords = text; refreshSessions(); }
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
