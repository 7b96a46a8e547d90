// The page's two views, chat and operate, and the header tabs between them.
"use strict";

import { $ } from "/page.js";

/** What a view does when it opens (the operate views fill this in: operate.js). */
export const viewOpened = {};

export function showView(name) {
  for (const v of ["chat", "operate"]) {
    $("view-" + v).hidden = v !== name;
    $("tab-" + v).classList.toggle("active", v === name);
  }
  if (viewOpened[name]) viewOpened[name]();
}
document.querySelectorAll("header .tab").forEach(b => b.addEventListener("click", () => showView(b.dataset.view)));
