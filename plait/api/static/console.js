// The plait console, core: signing in, the API, dates, routing; the runs list (search
// and paging) and a run's page (timeline, drawn graph, its pending decision, retry,
// fork, cancel, raise budget). console-graph.js draws graphs; console-pages.js holds
// the inbox, schedules, graphs, agents, topics and cluster pages. The run page follows
// the run's server-sent events (its models' replies as they stream, each commit),
// the runs list the runs feed's (each run's status as it changes), reconnecting with
// Last-Event-ID;
// it reads the events with fetch, as EventSource cannot send the bearer token.
// Every piece of run data is put on the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "plait.token";
const STATUSES = ["running", "waiting_human", "waiting_approval", "waiting_child", "done", "failed", "cancelled"];
const TERMINAL = new Set(["done", "failed", "cancelled"]);
const POLL_MS = 1000;
const SECTIONS = ["login", "runs", "run", "inbox", "schedules", "graphs", "agents", "topics", "cluster"];

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

function pad(n, width) { return String(Math.abs(n)).padStart(width || 2, "0"); }

// ISO 8601 in the browser's time zone, with its offset: 2026-12-02T05:21:08+01:00.
function iso(ts) {
  const d = new Date(ts * 1000);
  const off = -d.getTimezoneOffset();
  const zone = off === 0 ? "Z" : (off > 0 ? "+" : "-") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + zone;
}

// A span of seconds as people say it: 850 ms, 12.4 s, 3 min 5 s, 2 h 10 min, 3 d 4 h.
function span(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.abs(seconds);
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

function relative(ts) {
  const delta = Date.now() / 1000 - ts;
  return delta >= 0 ? span(delta) + " ago" : "in " + span(-delta);
}

// A <time> element: the ISO date with its offset, then how long ago (or until).
function when(ts) {
  const node = document.createElement("time");
  if (!ts) return node;
  node.dateTime = iso(ts);
  node.title = new Date(ts * 1000).toISOString();
  node.append(iso(ts) + " ", el("span", "(" + relative(ts) + ")", "ago"));
  return node;
}

// A table cell with its column's name, shown before the value on narrow screens.
function cell(label, content, cls) {
  const td = el("td", null, cls);
  if (label) td.dataset.label = label;
  if (content instanceof Node) td.append(content);
  else if (content !== null && content !== undefined && content !== "") td.textContent = String(content);
  return td;
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
  for (const id of SECTIONS) $(id).hidden = id !== section;
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
      document.body.dataset.loaded = location.hash || "#/";
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
    button.addEventListener("click", () => { statusFilter = status; renderFilters(); newSearch(); });
    nav.append(button);
  }
}

// The runs page's search: its filters, and the cursors of the pages before this one.
let search = { q: "", agent: "", graph: "", since: "", limit: 50 };
let pages = { cursors: [null], next: null };

function searchQuery() {
  const params = new URLSearchParams({ limit: String(search.limit) });
  if (statusFilter) params.set("status", statusFilter);
  if (search.q) params.set("q", search.q);
  if (search.agent) params.set("agent", search.agent);
  if (search.graph) params.set("graph", search.graph);
  if (search.since) params.set("since", String(Math.floor(Date.now() / 1000 - Number(search.since))));
  const cursor = pages.cursors[pages.cursors.length - 1];
  if (cursor) params.set("cursor", cursor);
  return params.toString();
}

function newSearch() {
  pages = { cursors: [null], next: null };
  followRuns();
}

function runRow(run) {
  const row = el("tr");
  row.dataset.run = run.run_id;
  const link = el("a", run.run_id, "id");
  link.href = "#/run/" + encodeURIComponent(run.run_id);
  const duration = run.duration !== null && run.duration !== undefined
    ? span(run.duration) : TERMINAL.has(run.status) ? "" : span(Date.now() / 1000 - run.created_at) + " so far";
  row.append(
    cell("run", link),
    cell("graph", run.agent + "/" + run.graph + " v" + run.version),
    cell("status", run.status, "status status-" + run.status),
    cell("started", when(run.created_at)),
    cell("duration", duration),
    cell("detail", run.ended_detail || (run.schedule_id ? "scheduled by " + run.schedule_id : ""), "muted"),
  );
  return row;
}

// The runs list follows the runs feed (GET /api/runs/events): it loads once the feed
// is watched, then each run whose listing status changes has its row redrawn in place;
// a run not on the page (a new one) reloads the first page. No polling: a server
// whose feed fails (an older one) is polled every POLL_MS as before.
async function followRuns() {
  stop();
  const controller = new AbortController();
  const mine = { controller, lastId: null };
  stream = mine;
  const refresh = oneAtATime(loadRuns, true);
  let opened = false;
  const onFrame = (frame) => {
    if (frame.event !== "run") {
      // The feed's first line: it is watched, so a list read now misses nothing.
      if (!opened) { opened = true; refresh(); }
      return false;
    }
    mine.lastId = frame.id;
    const run = JSON.parse(frame.data);
    const row = document.querySelector('#runs-body tr[data-run="' + CSS.escape(run.run_id) + '"]');
    if (row !== null && (!statusFilter || statusFilter === run.status)) row.replaceWith(runRow(run));
    else if (row !== null || pages.cursors.length === 1) refresh();
    return false;
  };
  let failures = 0;
  while (stream === mine) {
    try {
      const response = await openEvents("/api/runs/events", mine);
      if (response === null) return;
      if (!response.ok) { stream = null; every(loadRuns); return; }
      failures = 0;
      await eachFrame(response, onFrame);
    } catch (exc) {
      if (controller.signal.aborted) return;
      failures += 1;
      $("error").textContent = String(exc.message || exc);
      await new Promise((done) => setTimeout(done, Math.min(5, failures) * 1000));
    }
  }
}

async function loadRuns() {
  const page = await api("/api/runs?" + searchQuery());
  const body = $("runs-body");
  body.replaceChildren();
  for (const run of page.items) body.append(runRow(run));
  pages.next = page.next_cursor;
  const first = (pages.cursors.length - 1) * search.limit;
  $("runs-count").textContent = page.items.length
    ? "runs " + (first + 1) + "–" + (first + page.items.length) + " of " + page.total : "";
  $("runs-older").disabled = !page.next_cursor;
  $("runs-newer").disabled = pages.cursors.length <= 1;
  $("runs-empty").hidden = page.items.length > 0;
}

// -- a run --------------------------------------------------------------------------

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
      (step.elapsed !== null && step.elapsed !== undefined ? " · took " + span(step.elapsed) : "");
    item.dataset.node = step.node;
    item.append(el("strong", head));
    if (step.started_at) {
      const at = el("div", null, "muted");
      at.append("started ", when(step.started_at));
      item.append(at);
    }
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
  $("cancel").hidden = TERMINAL.has(view.status);
  $("budget-form").hidden = TERMINAL.has(view.status);
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

async function cancelRun(runId) {
  try {
    await api("/api/runs/" + encodeURIComponent(runId) + "/cancel", { method: "POST" });
    $("action-error").textContent = "";
    $("action-note").textContent = "Cancelled.";
    await loadRun(runId);
  } catch (exc) {
    $("action-error").textContent = String(exc.message || exc);
  }
}

async function raiseBudget(runId) {
  const limit = $("budget-limit").value;
  const amount = Number($("budget-amount").value);
  try {
    await api("/api/runs/" + encodeURIComponent(runId) + "/budget", { method: "POST", body: { [limit]: amount } });
    $("action-error").textContent = "";
    $("action-note").textContent = "Raised " + limit + " by " + amount + ".";
    $("budget-amount").value = "";
    followRun(runId);
  } catch (exc) {
    $("action-error").textContent = String(exc.message || exc);
  }
}

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

// After an answer: whether a process serves the mesh's runs, else a line saying the run
// waits until one starts (as `plait decisions answer` says).
async function servedNote() {
  const status = await api("/api/cluster");
  return status.served ? "" : UNSERVED;
}

const UNSERVED = "Answered, but no process serves this mesh: the run waits until one starts " +
  "(`plait worker`, or `plait serve --serve-runs`).";

async function answer(decisionId, body) {
  try {
    await api("/api/decisions/" + encodeURIComponent(decisionId) + "/answer", { method: "POST", body });
    $("asking").hidden = true;
    $("answer-text").value = "";
    $("action-note").textContent = await servedNote();
    const runId = $("run").dataset.run;
    if (runId && location.hash.startsWith("#/run/")) followRun(runId);
  } catch (exc) {
    $("answer-error").textContent = String(exc.message || exc);
  }
}

async function loadRun(runId) {
  const view = await api("/api/runs/" + encodeURIComponent(runId));
  const steps = await api("/api/runs/" + encodeURIComponent(runId) + "/trajectory");
  const graph = await api("/api/runs/" + encodeURIComponent(runId) + "/graph");
  $("run-title").textContent = view.run_id;
  const status = el("span", view.status, "status status-" + view.status);
  status.id = "run-status";
  $("run-meta").replaceChildren(
    view.agent + "/" + view.graph + " v" + view.version + " · ", status,
    view.ended_detail ? " · " + view.ended_detail : "",
  );
  const times = $("run-times");
  times.replaceChildren("started ", when(view.created_at));
  const took = el("span", null);
  took.id = "run-duration";
  if (view.duration !== null && view.duration !== undefined) {
    took.textContent = "took " + span(view.duration);
    times.append(" · ended ", when(view.updated_at), " · ", took);
  } else {
    took.textContent = span(Date.now() / 1000 - view.created_at) + " so far";
    times.append(" · ", took);
  }
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
  const scheduled = $("run-schedule");
  scheduled.replaceChildren();
  if (view.schedule_id) {
    const link = el("a", view.schedule_id);
    link.href = "#/schedules";
    scheduled.append("started by schedule ", link, " for its fire at ", when(view.fire_at));
  }
  scheduled.hidden = !view.schedule_id;
  const usage = Object.entries(view.usage || {}).filter(([, v]) => v)
    .map(([k, v]) => k + " " + (Number.isInteger(v) ? v : Number(v).toFixed(3)));
  const raised = Object.entries(view.budget_raised || {}).map(([k, v]) => k + " +" + v);
  $("run-usage").textContent = (usage.length ? "used: " + usage.join(", ") : "") +
    (raised.length ? (usage.length ? " · " : "") + "budget raised: " + raised.join(", ") : "");
  renderProgress(await loadProgress(runId));
  drawGraph($("graph"), graph, { current: graph.current, visits: graph.visits, failed: graph.failed });
  renderTimeline(steps);
  renderActions(view, steps);
  await renderAsking(view);
  $("run-output").textContent = view.output === null ? "" : shown(view.output);
  document.body.dataset.loaded = location.hash;
  return !TERMINAL.has(view.status);
}

// -- the run's live events ------------------------------------------------------------

// The stream the page follows (a run's, or the runs feed): its abort handle and the
// last event id seen.
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

// One load at a time, so an older load never renders over a newer one; a call while
// one loads runs it once more when that one ends. ``idle()`` waits for the loads begun.
function oneAtATime(load, marksLoaded) {
  let loading = null;
  let again = false;
  const run = () => {
    if (loading !== null) { again = true; return; }
    loading = load()
      .then(() => {
        $("error").textContent = "";
        if (marksLoaded) document.body.dataset.loaded = location.hash || "#/";
      })
      .catch((exc) => { if (exc.status !== 401) $("error").textContent = String(exc.message || exc); })
      .finally(() => {
        loading = null;
        if (again) { again = false; run(); }
      });
  };
  run.idle = async () => { while (loading !== null) await loading; };
  return run;
}

// Opens a server-sent events stream with the token (EventSource cannot send it),
// resuming after ``mine.lastId``; null when the token was refused (signed out).
async function openEvents(path, mine) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
  if (mine.lastId !== null) headers["Last-Event-ID"] = String(mine.lastId);
  const response = await fetch(path, { headers, signal: mine.controller.signal });
  if (response.status === 401) { signOut("the token was refused"); return null; }
  return response;
}

// Calls ``onFrame`` with each event of a stream, comments included (as a "message"
// with no data); true once it returned true, false when the stream ended.
async function eachFrame(response, onFrame) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = parseFrame(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (onFrame(frame)) { reader.cancel().catch(() => {}); return true; }
    }
  }
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
  const refresh = oneAtATime(() => loadRun(runId), false);
  refresh();
  let failures = 0;
  while (stream === mine) {
    try {
      const response = await openEvents("/api/runs/" + encodeURIComponent(runId) + "/events", mine);
      if (response === null) return;
      if (!response.ok) throw new ApiError(response.status, response.statusText);
      if (await eachFrame(response, (frame) => onLiveEvent(frame, refresh))) {
        stream = null;  // settled: the page shows the run as it stands
        await refresh.idle();  // loads begun before it settled
        await loadRun(runId);
        return;
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

// -- wiring -------------------------------------------------------------------------

// Each page's hash, and what loads it (polled while it shows).
const ROUTES = {
  "#/inbox": ["inbox", () => loadInbox],
  "#/schedules": ["schedules", () => loadSchedules],
  "#/graphs": ["graphs", () => loadGraphs],
  "#/agents": ["agents", () => loadAgents],
  "#/topics": ["topics", () => loadTopics],
  "#/cluster": ["cluster", () => loadCluster],
};

// A line for the next page shown (set by a form that moves to another page).
let noteAfterRoute = "";

async function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) { signOut(""); return; }
  $("action-note").textContent = noteAfterRoute;
  noteAfterRoute = "";
  $("unserved").hidden = true;
  $("inbox-list").replaceChildren();
  const match = /^#\/run\/(.+)$/.exec(location.hash);
  const page = ROUTES[location.hash.split("?")[0]];
  if (match) {
    show("run");
    $("asking").hidden = true;
    $("asking").dataset.decision = "";
    $("action-error").textContent = "";
    const runId = decodeURIComponent(match[1]);
    $("run").dataset.run = runId;
    followRun(runId);
    return;  // the run page reads only its run
  } else if (page) {
    show(page[0]);
    every(page[1]());
  } else {
    show("runs");
    renderFilters();
    loadStartForm();
    followRuns();
  }
  refreshInboxCount();
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
  $("cancel").addEventListener("click", () => cancelRun($("run").dataset.run));
  $("budget-form").addEventListener("submit", (event) => {
    event.preventDefault();
    raiseBudget($("run").dataset.run);
  });
  $("runs-search").addEventListener("submit", (event) => {
    event.preventDefault();
    search = {
      q: $("q").value.trim(), agent: $("f-agent").value.trim(), graph: $("f-graph").value.trim(),
      since: $("f-since").value, limit: Number($("runs-limit").value),
    };
    newSearch();
  });
  $("runs-limit").addEventListener("change", () => {
    search.limit = Number($("runs-limit").value);
    newSearch();
  });
  $("runs-older").addEventListener("click", () => {
    if (!pages.next) return;
    pages.cursors.push(pages.next);
    followRuns();
  });
  $("runs-newer").addEventListener("click", () => {
    if (pages.cursors.length > 1) pages.cursors.pop();
    followRuns();
  });
  wirePages();
  $("fork-form").addEventListener("submit", (event) => {
    event.preventDefault();
    fork($("run").dataset.run);
  });
  window.addEventListener("hashchange", route);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token); else signOut("");
});
