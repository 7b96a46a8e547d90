// The ferroclaw web app's operate views: channels, cron jobs, pairing,
// memory and skills, usage, the gateway's log. They use the page's helpers
// (page.js, markdown.js) and open when the Operate tab does (views.js).
"use strict";

import { $, api, el, toast, currentChat } from "/page.js";
import { renderInto } from "/markdown.js";
import { viewOpened } from "/views.js";

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
  if (!$("cron-deliver").value) $("cron-deliver").value = "web:" + currentChat();
  const { jobs } = await api("cron");
  const box = $("cron-jobs");
  box.replaceChildren();
  if (!jobs.length) box.appendChild(el("p", "hint", "No jobs yet."));
  for (const j of jobs) {
    const card = el("div", "card job-card" + (j.enabled ? "" : " paused"));
    card.dataset.id = j.id;
    // Times in the job's own time zone, as the gateway words them.
    const when = el("div", "hint when", `Next: ${j.next_run_text || "—"} · last: ${j.last_run_text || "never"}${j.last_status ? " (" + j.last_status + ")" : ""}${j.last_error ? " — " + j.last_error : ""}`);
    when.title = `next ${j.next_run || "—"}, last ${j.last_run || "never"}`;
    card.append(el("h3", "", j.name + (j.enabled ? "" : " (paused)")), el("div", "explained", j.explained), el("div", "hint", j.schedule + (j.deliver_to ? " → " + j.deliver_to : "")),
      el("div", "", j.message), when);
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
    out.textContent = r.explained + " — next: " + r.next.join("; "); out.className = "hint ok";
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

viewOpened.operate = () => showPane(showPane.current || "channels");
