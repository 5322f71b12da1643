// The plait console: runs, a run's timeline and graph, its pending decision, retry and
// fork of a run, and the schedules. The run page follows the run's server-sent events
// (its models' replies as they stream, each commit), reconnecting with Last-Event-ID;
// it reads the events with fetch, as EventSource cannot send the bearer token.
// Every piece of run data is put on the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "plait.token";
const STATUSES = ["running", "waiting_human", "waiting_approval", "waiting_child", "done", "failed", "cancelled"];
const TERMINAL = new Set(["done", "failed", "cancelled"]);
const POLL_MS = 1000;

let timer = null;
let statusFilter = "";

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "";
}

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

async function api(path, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = Object.assign({ Authorization: "Bearer " + token }, options.headers || {});
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    if (response.status === 401) signOut("the token was refused: " + (body && body.detail));
    throw new ApiError(response.status, (body && body.detail) || response.statusText);
  }
  return body;
}

function show(section) {
  for (const id of ["login", "runs", "run", "schedules"]) $(id).hidden = id !== section;
  $("pages").hidden = section === "login";
}

function signOut(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").textContent = "";
  $("signout").hidden = true;
  $("login-error").textContent = reason || "";
  stop();
  show("login");
}

function stop() {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  stopStream();
}

function every(fn) {
  stop();
  const tick = async () => {
    let again = true;
    try {
      again = (await fn()) !== false;
      $("error").textContent = "";
    } catch (exc) {
      if (exc.status === 401) return;
      $("error").textContent = String(exc.message || exc);
    }
    if (again) timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

// -- runs ---------------------------------------------------------------------------

function renderFilters() {
  const nav = $("filters");
  nav.replaceChildren();
  for (const status of ["", ...STATUSES]) {
    const button = el("button", status || "all", status === statusFilter ? "active" : "");
    button.type = "button";
    button.dataset.status = status;
    button.addEventListener("click", () => { statusFilter = status; renderFilters(); every(loadRuns); });
    nav.append(button);
  }
}

async function loadRuns() {
  const query = statusFilter ? "&status=" + encodeURIComponent(statusFilter) : "";
  const page = await api("/api/runs?limit=100" + query);
  const body = $("runs-body");
  body.replaceChildren();
  for (const run of page.items) {
    const row = el("tr");
    row.dataset.run = run.run_id;
    const link = el("a", run.run_id);
    link.href = "#/run/" + encodeURIComponent(run.run_id);
    const first = el("td");
    first.append(link);
    row.append(
      first,
      el("td", run.agent + "/" + run.graph + " v" + run.version),
      el("td", run.status, "status status-" + run.status),
      el("td", when(run.updated_at)),
      el("td", run.ended_detail || "", "muted"),
    );
    body.append(row);
  }
  $("runs-empty").hidden = page.items.length > 0;
}

// -- a run --------------------------------------------------------------------------

function unescapeMermaid(text) {
  return text.replace(/#lt;/g, "<").replace(/#gt;/g, ">").replace(/#quot;/g, '"').replace(/#amp;/g, "&");
}

// Reads the flowchart to_mermaid writes: node lines, then arrows, then the entry class.
function parseMermaid(text) {
  const nodes = new Map();
  const edges = [];
  const nodeLine = /^\s*(n_\w+)(\[\/|\[\\|\[\[|\(\[|\{\{|\[|\{|>)"(.*)"(\/\]|\\\]|\]\]|\]\)|\}\}|\]|\})\s*$/;
  const edgeLine = /^\s*(n_\w+) (-->|-\.->)(?:\|(.*?)\|)? (n_\w+)\s*$/;
  for (const line of text.split("\n").slice(1)) {
    let m = nodeLine.exec(line);
    if (m) {
      const [label, kind] = m[3].split("<br/><i>");
      nodes.set(m[1], { id: unescapeMermaid(label), kind: (kind || "").replace("</i>", ""), out: [] });
      continue;
    }
    m = edgeLine.exec(line);
    if (m) {
      let label = m[3] || "";
      if (label.startsWith('"') && label.endsWith('"')) label = label.slice(1, -1);
      edges.push({ from: m[1], to: m[4], label: unescapeMermaid(label), dotted: m[2] === "-.->" });
    }
  }
  for (const edge of edges) {
    const from = nodes.get(edge.from);
    const to = nodes.get(edge.to);
    if (from && to) from.out.push({ to: to.id, label: edge.label, dotted: edge.dotted });
  }
  return [...nodes.values()];
}

function renderGraph(mermaid, current) {
  const marked = new Set(current.map((key) => key.split("[")[0]));
  const list = $("graph");
  list.replaceChildren();
  for (const node of parseMermaid(mermaid)) {
    const item = el("li", null, marked.has(node.id) ? "current" : "");
    item.dataset.node = node.id;
    item.append(el("strong", node.id), el("span", node.kind, "kind"));
    if (marked.has(node.id)) item.append(el("span", "◀ now", "mark"));
    for (const edge of node.out) {
      const arrow = (edge.dotted ? "⇢ " : "→ ") + edge.to + (edge.label ? " (" + edge.label + ")" : "");
      item.append(el("div", arrow, "edges"));
    }
    list.append(item);
  }
}

function field(parent, label, value) {
  if (value === null || value === undefined || value === "") return;
  parent.append(el("div", label, "label"), el("pre", shown(value)));
}

function renderTimeline(steps) {
  const list = $("timeline");
  list.replaceChildren();
  for (const step of steps) {
    const item = el("li", null, "step-" + step.status);
    const head = step.node + " · visit " + step.visit + " · " + step.status +
      (step.elapsed ? " · " + step.elapsed.toFixed(2) + " s" : "");
    item.append(el("strong", head));
    field(item, "prompt", step.prompt);
    field(item, "output", step.output);
    field(item, "verdict", step.verdict);
    field(item, "error", step.error);
    for (const call of step.tools || []) {
      field(item, "tool " + call.name, { arguments: call.arguments, result: call.result });
    }
    const usage = Object.entries(step.usage || {}).map(([k, v]) => k + " " + v).join(", ");
    field(item, "usage", usage);
    if (step.decision) {
      const d = step.decision;
      field(item, "decision", d.answer === null ? d.status : d.answer + " (by " + d.by + ")");
    }
    list.append(item);
  }
}

// What a fork may start after: each committed visit, as node:visit.
function renderActions(view, steps) {
  $("retry").hidden = view.status !== "failed";
  const select = $("fork-at");
  const visits = steps.filter((s) => s.status !== "waiting").map((s) => s.node + ":" + s.visit);
  const had = select.value;
  if (select.dataset.visits !== visits.join("\n")) {
    select.replaceChildren(...visits.map((v) => { const o = el("option", v); o.value = v; return o; }));
    select.dataset.visits = visits.join("\n");
    if (visits.includes(had)) select.value = had;
  }
  $("fork-form").hidden = visits.length === 0;
}

async function retry(runId) {
  try {
    await api("/api/runs/" + encodeURIComponent(runId) + "/retry", { method: "POST" });
    $("action-error").textContent = "";
    followRun(runId);
  } catch (exc) {
    $("action-error").textContent = String(exc.message || exc);
  }
}

async function fork(runId) {
  const body = { at: $("fork-at").value };
  const input = $("fork-input").value;
  if (input !== "") body.input = input;
  try {
    const view = await api("/api/runs/" + encodeURIComponent(runId) + "/fork", { method: "POST", body });
    $("action-error").textContent = "";
    $("fork-input").value = "";
    location.hash = "#/run/" + encodeURIComponent(view.run_id);
  } catch (exc) {
    $("action-error").textContent = String(exc.message || exc);
  }
}

let graphText = { key: "", mermaid: "" };
// The run page's progress: the Progress entries (the API's Progress schema) read so far.
let progressOf = { run: "", after: 0, last: null };

async function loadProgress(runId) {
  if (progressOf.run !== runId) progressOf = { run: runId, after: 0, last: null };
  const found = await api("/api/runs/" + encodeURIComponent(runId) + "/progress?after=" +
    progressOf.after);
  for (const progress of found) {
    progressOf.after = Math.max(progressOf.after, progress.audit_seq);
    progressOf.last = progress;
  }
  return progressOf.last;
}

function renderProgress(progress) {
  const parts = [];
  if (progress) {
    if (progress.node) {
      const visit = progress.visit ? " (visit " + progress.visit + ")" : "";
      const verdict = progress.verdict ? " → " + progress.verdict : "";
      parts.push("last: " + progress.node + visit + verdict);
    }
    if (progress.error) parts.push("error: " + progress.error);
    if (progress.retry_in !== undefined && progress.retry_in !== null) {
      parts.push("again in " + progress.retry_in.toFixed(1) + "s");
    }
    const started = (progress.started || []).map((v) => v.node + " (visit " + v.visit + ")");
    if (started.length) parts.push("started: " + started.join(", "));
  }
  $("run-progress").textContent = parts.join(" · ");
}

async function renderAsking(view) {
  const box = $("asking");
  const asking = view.asking;
  if (!asking || !asking.decision_id || TERMINAL.has(view.status)) {
    box.hidden = true;
    box.dataset.decision = "";
    return;
  }
  if (box.dataset.decision === asking.decision_id && !box.hidden) return;
  const decision = await api("/api/decisions/" + encodeURIComponent(asking.decision_id));
  box.dataset.decision = decision.id;
  $("ask-text").textContent = decision.title;
  $("answer-error").textContent = "";
  const buttons = $("ask-buttons");
  buttons.replaceChildren();
  for (const option of decision.options) {
    const button = el("button", option, "primary");
    button.type = "button";
    button.dataset.option = option;
    button.addEventListener("click", () => answer(decision.id, { option }));
    buttons.append(button);
  }
  $("answer-form").hidden = decision.kind !== "text";
  box.hidden = false;
}

async function answer(decisionId, body) {
  try {
    await api("/api/decisions/" + encodeURIComponent(decisionId) + "/answer", { method: "POST", body });
    $("asking").hidden = true;
    const runId = $("run").dataset.run;
    if (runId && location.hash.startsWith("#/run/")) followRun(runId);
  } catch (exc) {
    $("answer-error").textContent = String(exc.message || exc);
  }
}

async function loadRun(runId) {
  const view = await api("/api/runs/" + encodeURIComponent(runId));
  const steps = await api("/api/runs/" + encodeURIComponent(runId) + "/trajectory");
  const key = view.agent + "/" + view.graph + "?version=" + view.version;
  if (graphText.key !== key) {
    const graph = await api("/api/graphs/" + encodeURIComponent(view.agent) + "/" +
      encodeURIComponent(view.graph) + "?version=" + view.version);
    graphText = { key, mermaid: graph.mermaid };
  }
  $("run-title").textContent = view.run_id;
  const status = el("span", view.status, "status status-" + view.status);
  status.id = "run-status";
  $("run-meta").replaceChildren(
    view.agent + "/" + view.graph + " v" + view.version + " · ", status,
    view.ended_detail ? " · " + view.ended_detail : "",
  );
  const origin = $("run-origin");
  origin.replaceChildren();
  if (view.forked_from) {
    const from = view.forked_from;
    const link = el("a", from.run_id);
    link.href = "#/run/" + encodeURIComponent(from.run_id);
    origin.append("forked from ", link, " after " + from.node + ":" + from.visit +
      " (event " + from.seq + ", " + from.hash.slice(0, 12) + ")");
  }
  origin.hidden = !view.forked_from;
  renderProgress(await loadProgress(runId));
  renderGraph(graphText.mermaid, view.current);
  renderTimeline(steps);
  renderActions(view, steps);
  await renderAsking(view);
  $("run-output").textContent = view.output === null ? "" : shown(view.output);
  return !TERMINAL.has(view.status);
}

// -- the run's live events ------------------------------------------------------------

// The stream the run page follows: its run, abort handle, and the last event id seen.
let stream = null;

function stopStream() {
  if (stream !== null) stream.controller.abort();
  stream = null;
}

function parseFrame(text) {
  const frame = { event: "message", data: "" };
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;  // a comment, or no field
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, "");
    if (name === "id") frame.id = Number(value);
    else if (name === "event") frame.event = value;
    else if (name === "data") frame.data += value;
  }
  return frame;
}

function liveSection(data) {
  const key = data.node + "/" + data.visit + "/" + data.attempt;
  let section = document.querySelector('#run-live section[data-key="' + CSS.escape(key) + '"]');
  if (section === null) {
    section = el("section");
    section.dataset.key = key;
    section.dataset.node = data.node;
    section.append(el("h3", data.node + " (visit " + data.visit + ", attempt " + data.attempt + ")"));
    if (data.restart) {
      section.append(el("p", "↻ attempt " + data.attempt + " restarted this node", "restart"));
    }
    section.append(el("pre", "", "live-text"));
    $("run-live").append(section);
  }
  return section;
}

function onLiveEvent(frame, refresh) {
  if (frame.id !== undefined && !Number.isNaN(frame.id) && frame.id > 0) stream.lastId = frame.id;
  const data = frame.data ? JSON.parse(frame.data) : null;
  if (frame.event === "attempt") {
    liveSection(data);
  } else if (frame.event === "delta") {
    // Appended as a text node: model output never becomes markup.
    liveSection(data).querySelector("pre").append(document.createTextNode(data.text));
  } else if (frame.event === "progress") {
    if (data.node) {
      for (const section of document.querySelectorAll("#run-live section")) {
        if (section.dataset.node === data.node) section.classList.add("committed");
      }
    }
    refresh();
  } else if (frame.event === "settled") {
    return true;
  }
  return false;
}

async function followRun(runId) {
  stop();
  const controller = new AbortController();
  const mine = { controller, runId, lastId: null };
  stream = mine;
  $("run-live").replaceChildren();
  let loading = null;
  const refresh = () => {
    if (loading !== null) return;
    loading = loadRun(runId)
      .then(() => { $("error").textContent = ""; })
      .catch((exc) => { if (exc.status !== 401) $("error").textContent = String(exc.message || exc); })
      .finally(() => { loading = null; });
  };
  refresh();
  let failures = 0;
  while (stream === mine) {
    try {
      const headers = { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
      if (mine.lastId !== null) headers["Last-Event-ID"] = String(mine.lastId);
      const response = await fetch("/api/runs/" + encodeURIComponent(runId) + "/events",
        { headers, signal: controller.signal });
      if (response.status === 401) { signOut("the token was refused"); return; }
      if (!response.ok) throw new ApiError(response.status, response.statusText);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (onLiveEvent(frame, refresh)) {
            stream = null;  // settled: the page shows the run as it stands
            await loadRun(runId);
            return;
          }
        }
      }
      failures = 0;  // the server ended the stream early: reconnect where it stopped
    } catch (exc) {
      if (controller.signal.aborted) return;
      failures += 1;
      $("error").textContent = String(exc.message || exc);
      await new Promise((done) => setTimeout(done, Math.min(5, failures) * 1000));
    }
  }
}

// -- schedules ----------------------------------------------------------------------

async function loadSchedules() {
  const found = await api("/api/schedules");
  const body = $("schedules-body");
  body.replaceChildren();
  for (const schedule of found) {
    const row = el("tr");
    row.dataset.schedule = schedule.id;
    const toggle = el("button", schedule.paused ? "Resume" : "Pause");
    toggle.type = "button";
    toggle.dataset.act = schedule.paused ? "resume" : "pause";
    toggle.addEventListener("click", () => toggleSchedule(schedule.id, toggle.dataset.act));
    const act = el("td");
    act.append(toggle);
    const started = el("td");
    for (const run of schedule.runs.slice(-3).reverse()) {
      const link = el("a", run.run_id);
      link.href = "#/run/" + encodeURIComponent(run.run_id);
      const line = el("div", null, "delivery delivery-" + run.status);
      line.append(link, " " + run.status + (run.last_error ? ": " + run.last_error : ""));
      started.append(line);
    }
    row.append(
      el("td", schedule.id),
      el("td", schedule.agent + "/" + schedule.name),
      el("td", schedule.cron + " (" + schedule.tz + ")"),
      el("td", schedule.input === null ? "" : shown(schedule.input)),
      el("td", schedule.deliver),
      el("td", schedule.paused ? "paused" : "active", "state state-" + (schedule.paused ? "paused" : "active")),
      el("td", when(schedule.next_fire)),
      el("td", schedule.fired),
      started,
      el("td", schedule.last_error || "", "error"),
      act,
    );
    body.append(row);
  }
  $("schedules-empty").hidden = found.length > 0;
}

async function toggleSchedule(scheduleId, act) {
  try {
    await api("/api/schedules/" + encodeURIComponent(scheduleId) + "/" + act, { method: "POST" });
    $("schedules-error").textContent = "";
    every(loadSchedules);
  } catch (exc) {
    $("schedules-error").textContent = String(exc.message || exc);
  }
}

// -- wiring -------------------------------------------------------------------------

async function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) { signOut(""); return; }
  const match = /^#\/run\/(.+)$/.exec(location.hash);
  if (match) {
    show("run");
    $("asking").hidden = true;
    $("asking").dataset.decision = "";
    $("action-error").textContent = "";
    const runId = decodeURIComponent(match[1]);
    $("run").dataset.run = runId;
    followRun(runId);
  } else if (location.hash === "#/schedules") {
    show("schedules");
    every(loadSchedules);
  } else {
    show("runs");
    renderFilters();
    every(loadRuns);
  }
}

async function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    const who = await api("/api/whoami");
    $("who").textContent = who.kind + " " + who.name;
    $("signout").hidden = false;
    route();
  } catch (exc) {
    if (exc.status !== 401) $("login-error").textContent = String(exc.message || exc);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    signIn($("token").value.trim());
  });
  $("answer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    answer($("asking").dataset.decision, { text: $("answer-text").value });
  });
  $("signout").addEventListener("click", () => signOut(""));
  $("retry").addEventListener("click", () => retry($("run").dataset.run));
  $("fork-form").addEventListener("submit", (event) => {
    event.preventDefault();
    fork($("run").dataset.run);
  });
  window.addEventListener("hashchange", route);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token); else signOut("");
});
