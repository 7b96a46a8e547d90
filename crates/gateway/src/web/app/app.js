// The ferroclaw web app: chat (Markdown as it streams, tool cards, todos,
// jobs, approvals, stop, images, per-message copy / regenerate / edit, a
// model picker) and the conversations sidebar. Plain JavaScript modules, no
// build step; this one starts the page, the others hold its parts:
//   page.js       the token and the JSON API, the conversation shown, element helpers
//   markdown.js   Markdown rendered (marked), sanitized (DOMPurify), highlighted (Prism)
//   messages.js   the chat log: messages, the streaming answer, tool cards, history
//   live.js       the todo list and background jobs above the composer
//   approvals.js  approval cards
//   socket.js     the WebSocket, and every frame from the gateway to its part of the page
//   composer.js   the text box, pictures, the model picker, Stop
//   sidebar.js    the conversations list, search, rename, switching chats
//   views.js      the chat and operate views; operate.js holds the operate views
"use strict";

import { showFilter, refreshSessions } from "/sidebar.js";
import { connect } from "/socket.js";

window.addEventListener("DOMContentLoaded", () => { showFilter(); connect(); refreshSessions(); });
