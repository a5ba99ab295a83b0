// Cordon's web page: sessions, a live transcript, permission approvals. No build step, no
// dependencies. Everything shown comes from the model or the sandbox, so it is only ever
// set as text (textContent), never parsed as HTML.
"use strict";

const KEY = "cordon.key";
const $ = (sel) => document.querySelector(sel);
const state = { session: null, lastEventId: null, abort: null, pending: new Map() };

function key() { return sessionStorage.getItem(KEY); }

function status(text) { $("#status").textContent = text; }

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + key() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!res.ok) {
    const msg = json && json.error ? (json.error.message || json.error.code || JSON.stringify(json.error)) : text;
    throw new Error(method + " " + path + ": " + res.status + " " + msg);
  }
  return json;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c);
  return node;
}

// ---- sessions list -------------------------------------------------------------------

function sessionsOf(json) {
  if (Array.isArray(json)) return json;
  return (json && (json.sessions || json.items || json.data)) || [];
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => k + "=" + v).join(" ");
}

async function loadSessions() {
  const body = $("#sessions tbody");
  const json = await api("GET", "/v1/sessions");
  body.replaceChildren(...sessionsOf(json).map((s) => {
    const row = el("tr", { "data-id": s.id },
      el("td", {}, el("code", {}, String(s.id))),
      el("td", { class: "state" }, stateText(s)),
      el("td", {}, labelsText(s.labels)),
      el("td", {}, String(s.created_at || "")));
    if (s.id === state.session) row.classList.add("selected");
    row.addEventListener("click", () => openSession(s.id).catch(fail));
    return row;
  }));
}

function stateText(s) {
  const st = typeof s.state === "object" && s.state ? (s.state.state || s.state.name) : s.state;
  const reason = s.reason || (s.state && s.state.reason);
  return String(st || "") + (reason ? " (" + reason + ")" : "");
}

// ---- one session ---------------------------------------------------------------------

async function openSession(id) {
  if (state.abort) state.abort.abort();
  state.session = id;
  state.lastEventId = null;
  state.pending.clear();
  renderPending();
  $("#transcript").replaceChildren();
  $("#session-id").textContent = id;
  $("#session-pane").hidden = false;
  for (const row of document.querySelectorAll("#sessions tbody tr")) {
    row.classList.toggle("selected", row.dataset.id === id);
  }
  const info = await api("GET", "/v1/sessions/" + encodeURIComponent(id));
  $("#session-state").textContent = stateText(info || {});
  stream(id);
}

// Reads the session's event stream with fetch (EventSource cannot send the key), and
// reconnects with Last-Event-ID after a drop, so nothing is missed or shown twice.
async function stream(id) {
  const ctl = new AbortController();
  state.abort = ctl;
  while (state.session === id && !ctl.signal.aborted) {
    try {
      const headers = { Authorization: "Bearer " + key(), Accept: "text/event-stream" };
      if (state.lastEventId !== null) headers["Last-Event-ID"] = state.lastEventId;
      const res = await fetch("/v1/sessions/" + encodeURIComponent(id) + "/events", { headers, signal: ctl.signal });
      if (!res.ok) throw new Error("events: " + res.status);
      status("live");
      await readSse(res.body, (ev) => { if (state.session === id) onEvent(ev); });
    } catch (e) {
      if (ctl.signal.aborted) return;
      status("reconnecting: " + e.message);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function readSse(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let ev = { id: null, event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r?\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === "\r" ? 2 : 1));
      if (line === "") {
        if (ev.data.length) onMessage(ev);
        ev = { id: null, event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") ev.data.push(val);
      else if (field === "event") ev.event = val;
      else if (field === "id") ev.id = val;
    }
  }
}

function onEvent(raw) {
  if (raw.id !== null) state.lastEventId = raw.id;
  let data;
  try { data = JSON.parse(raw.data.join("\n")); } catch (_) { data = { text: raw.data.join("\n") }; }
  const type = raw.event !== "message" ? raw.event : (data.type || "message");
  const body = data.data && typeof data.data === "object" ? data.data : data;
  show(type, body);
}

const first = (o, ...names) => { for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n]; return undefined; };
const asText = (v) => typeof v === "string" ? v : JSON.stringify(v);

function line(cls, text) {
  const t = $("#transcript");
  const li = el("li", { class: cls }, text);
  t.append(li);
  t.scrollTop = t.scrollHeight;
  return li;
}

function show(type, d) {
  switch (type) {
    case "text_delta": case "text": {
      const last = $("#transcript").lastElementChild;
      const text = asText(first(d, "text", "delta") ?? "");
      if (last && last.classList.contains("assistant")) last.textContent += text;
      else line("assistant", text);
      break;
    }
    case "user_message": case "user":
      line("user", "> " + userText(d));
      break;
    case "assistant":
      // Its text already streamed as text_delta events, its tool calls come as tool_call.
      break;
    case "tool_use": case "tool_call":
      line("tool_use", "⚙ " + first(d, "name", "tool") + " " + asText(first(d, "input") ?? {}));
      break;
    case "tool_result": {
      const err = first(d, "is_error") === true;
      line("tool_result" + (err ? " error" : ""), (err ? "✗ " : "✓ ") + asText(first(d, "content", "output") ?? ""));
      resolved(first(d, "request_id"), first(d, "tool_use_id"));
      break;
    }
    case "permission_request":
      state.pending.set(String(first(d, "request_id", "id")), d);
      renderPending();
      line("permission", "? permission asked for " + first(d, "tool", "tool_name", "name"));
      break;
    case "permission_resolved": case "permission_decision": case "permission_answer":
      resolved(first(d, "request_id", "id"), first(d, "tool_use_id"));
      line("permission", "permission " + asText(first(d, "decision") ?? "answered"));
      break;
    case "lifecycle": case "state": case "session_state": {
      const st = first(d, "state", "to");
      $("#session-state").textContent = String(st) + (d.reason ? " (" + d.reason + ")" : "");
      line("lifecycle", "session " + st + (d.reason ? ": " + d.reason : ""));
      break;
    }
    case "result":
      line("lifecycle", "turn ended: " + asText(first(d, "subtype", "result", "text") ?? d));
      break;
    case "usage":
      break;
    default:
      line("other", type + " " + asText(d));
  }
}

function userText(d) {
  const msg = d.message || d;
  const content = msg.content !== undefined ? msg.content : first(d, "text");
  if (Array.isArray(content)) {
    return content.map((b) => (b && b.type === "text" ? b.text : asText(b))).join("\n");
  }
  return asText(content ?? d);
}

function resolved(requestId, toolUseId) {
  for (const [id, req] of state.pending) {
    if ((requestId !== undefined && id === String(requestId)) ||
        (toolUseId !== undefined && req.tool_use_id === toolUseId)) state.pending.delete(id);
  }
  renderPending();
}

function renderPending() {
  const list = $("#permissions");
  if (state.pending.size === 0) { list.replaceChildren(el("li", { class: "none" }, "none")); return; }
  list.replaceChildren(...[...state.pending].map(([id, req]) => {
    const allow = el("button", { type: "button", class: "allow" }, "Allow");
    const deny = el("button", { type: "button", class: "deny danger" }, "Deny");
    allow.addEventListener("click", () => answer(id, "allow").catch(fail));
    deny.addEventListener("click", () => answer(id, "deny").catch(fail));
    return el("li", { "data-request-id": id },
      el("strong", {}, String(first(req, "tool", "tool_name", "name") || "tool")),
      el("pre", {}, asText(first(req, "input", "command", "description") ?? req)),
      allow, " ", deny);
  }));
}

async function answer(requestId, decision) {
  const id = state.session;
  await api("POST", "/v1/sessions/" + encodeURIComponent(id) + "/permissions/" + encodeURIComponent(requestId), { decision });
  state.pending.delete(requestId);
  renderPending();
}

async function sessionAction(action) {
  const id = state.session;
  if (!id) return;
  if (action === "delete") {
    await api("DELETE", "/v1/sessions/" + encodeURIComponent(id));
    if (state.abort) state.abort.abort();
    state.session = null;
    $("#session-pane").hidden = true;
  } else {
    await api("POST", "/v1/sessions/" + encodeURIComponent(id) + "/" + action, {});
  }
  await loadSessions();
}

function fail(e) { status(e.message); }

function showApp() {
  const on = !!key();
  $("#app").hidden = !on;
  $("#logout").hidden = !on;
  $("#key").required = !on;
  if (on) loadSessions().then(() => status("signed in")).catch(fail);
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("#key").value.trim());
    $("#key").value = "";
    showApp();
  });
  $("#logout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    if (state.abort) state.abort.abort();
    state.session = null;
    showApp();
  });
  $("#refresh").addEventListener("click", () => loadSessions().catch(fail));
  for (const a of ["pause", "resume", "interrupt", "delete"]) {
    $("#" + a).addEventListener("click", () => sessionAction(a).catch(fail));
  }
  $("#message").addEventListener("submit", (e) => {
    e.preventDefault();
    const content = $("#message-text").value;
    if (!content || !state.session) return;
    api("POST", "/v1/sessions/" + encodeURIComponent(state.session) + "/messages", { content })
      .then(() => { $("#message-text").value = ""; }).catch(fail);
  });
  showApp();
});
