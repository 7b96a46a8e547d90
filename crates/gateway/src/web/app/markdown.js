// Markdown in the web app: marked renders it, DOMPurify sanitizes it, Prism
// highlights its code (all three vendored in /vendor/); each code block gets
// a header with its language and a copy button.
"use strict";

import { el, copyText, flash } from "/page.js";

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
