// The plait console's other pages: the decisions inbox (answered in place), schedules
// (create, pause, resume, delete), graphs and their versions, agents, topics and the
// cluster; and the start-a-run form. Uses console.js's helpers ($, el, cell, api,
// when, span, every); everything from the API is put on the page as text.
"use strict";

// -- inbox ----------------------------------------------------------------------------

let inboxFilter = { q: "", agent: "" };

function showUnserved(served) {
  const line = $("unserved");
  line.textContent = served ? "" : "No process serves this mesh: answered and started runs " +
    "wait until one starts (`plait worker`, or `plait serve --serve-runs`).";
  line.hidden = served;
}

async function refreshInboxCount() {
  try {
    const page = await api("/api/inbox?limit=1");
    $("inbox-count").textContent = String(page.total);
    $("inbox-count").hidden = page.total === 0;
  } catch (exc) {
    // The count is a hint: the page in view reports its own errors.
  }
}

function inboxCard(item) {
  const d = item.decision;
  const card = el("li", null, "card");
  card.dataset.decision = d.id;
  card.append(el("pre", d.title, "ask"));
  const meta = el("div", null, "meta");
  meta.append(d.kind + " · raised by " + d.raised_by + " ", when(d.created_at));
  if (d.run_id) {
    const link = el("a", d.run_id, "id");
    link.href = "#/run/" + encodeURIComponent(d.run_id);
    meta.append(" · run ", link);
    if (item.run) meta.append(" (" + item.run.agent + "/" + item.run.graph + ", node " + (d.node || "?") + ")");
  }
  if (d.expires_at) meta.append(" · expires ", when(d.expires_at));
  card.append(meta);
  if (Object.keys(d.data || {}).length) card.append(el("pre", shown(d.data)));
  const note = el("p", "", "error");
  const options = el("div", null, "options");
  for (const option of d.options) {
    const button = el("button", option, "primary");
    button.type = "button";
    button.dataset.option = option;
    button.addEventListener("click", () => answerInPlace(card, d.id, { option }, note));
    options.append(button);
  }
  card.append(options);
  if (d.kind === "text" || d.options.length === 0) {
    const form = el("form");
    const input = el("input");
    input.type = "text";
    input.placeholder = "Answer…";
    input.setAttribute("aria-label", "answer");
    const send = el("button", "Answer");
    send.type = "submit";
    form.append(input, send);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      answerInPlace(card, d.id, { text: input.value }, note);
    });
    card.append(form);
  }
  card.append(note);
  return card;
}

async function answerInPlace(card, decisionId, body, note) {
  try {
    const done = await api("/api/decisions/" + encodeURIComponent(decisionId) + "/answer", { method: "POST", body });
    card.classList.add("answered");
    card.dataset.answered = "1";
    for (const part of card.querySelectorAll(".options, form")) part.remove();
    const said = done.answer ? (done.answer.option || done.answer.text || "") : done.status;
    const line = el("p", "Answered: " + said, "muted answered-line");
    card.insertBefore(line, note);
    const served = await servedNote();
    note.textContent = served;
    note.className = served ? "warning" : "";
    refreshInboxCount();
  } catch (exc) {
    note.textContent = String(exc.message || exc);
  }
}

async function loadInbox() {
  const params = new URLSearchParams();
  if (inboxFilter.q) params.set("q", inboxFilter.q);
  if (inboxFilter.agent) params.set("agent", inboxFilter.agent);
  const page = await api("/api/inbox?" + params.toString());
  showUnserved(page.served);
  const list = $("inbox-list");
  const shownIds = new Set(page.items.map((item) => item.decision.id));
  // Cards stay as they are while shown (a half-typed answer is kept); answered ones
  // stay until the page is left, new ones are added.
  for (const card of [...list.children]) {
    if (!shownIds.has(card.dataset.decision) && !card.dataset.answered) card.remove();
  }
  const have = new Set([...list.children].map((card) => card.dataset.decision));
  for (const item of page.items) {
    if (!have.has(item.decision.id)) list.append(inboxCard(item));
  }
  $("inbox-empty").hidden = list.children.length > 0;
  $("inbox-count").textContent = String(page.total);
  $("inbox-count").hidden = page.total === 0;
}

// -- schedules ------------------------------------------------------------------------

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
    const remove = el("button", "Delete", "danger");
    remove.type = "button";
    remove.dataset.act = "delete";
    remove.addEventListener("click", () => deleteSchedule(schedule.id, remove));
    const act = el("div");
    act.append(toggle, " ", remove);
    const started = el("div");
    for (const run of schedule.runs.slice(-3).reverse()) {
      const link = el("a", run.run_id, "id");
      link.href = "#/run/" + encodeURIComponent(run.run_id);
      const line = el("div", null, "delivery delivery-" + run.status);
      line.append(link, " " + run.status + (run.last_error ? ": " + run.last_error : ""));
      started.append(line);
    }
    const fired = schedule.fired + (schedule.skipped ? " (" + schedule.skipped + " skipped)" : "");
    row.append(
      cell("schedule", schedule.id, "id"),
      cell("graph", schedule.agent + "/" + schedule.name),
      cell("when", schedule.cron + " (" + schedule.tz + ")"),
      cell("input", schedule.input === null ? "" : shown(schedule.input)),
      cell("deliver", schedule.deliver),
      cell("state", schedule.paused ? "paused" : "active", "state state-" + (schedule.paused ? "paused" : "active")),
      cell("next fire", schedule.next_fire ? when(schedule.next_fire) : ""),
      cell("fired", fired),
      cell("runs", started.childElementCount ? started : ""),
      cell("last error", schedule.last_error || "", "error"),
      cell("", act),
    );
    body.append(row);
  }
  $("schedules-empty").hidden = found.length > 0;
  await fillGraphChoices($("schedule-graph"));
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

// Delete takes two clicks: the first asks, the second deletes.
async function deleteSchedule(scheduleId, button) {
  if (button.dataset.act !== "confirm-delete") {
    button.dataset.act = "confirm-delete";
    button.textContent = "Really delete?";
    return;
  }
  try {
    await api("/api/schedules/" + encodeURIComponent(scheduleId), { method: "DELETE" });
    $("schedules-error").textContent = "";
    every(loadSchedules);
  } catch (exc) {
    $("schedules-error").textContent = String(exc.message || exc);
  }
}

async function createSchedule() {
  const [agent, name] = $("schedule-graph").value.split("/");
  const body = {
    agent, name, cron: $("schedule-cron").value.trim(), tz: $("schedule-tz").value.trim(),
    deliver: $("schedule-deliver").value.trim(), catch_up: $("schedule-catch-up").value,
  };
  if ($("schedule-input").value !== "") body.input = $("schedule-input").value;
  try {
    await api("/api/schedules", { method: "POST", body });
    $("schedule-form-error").textContent = "";
    $("schedule-cron").value = "";
    $("schedule-input").value = "";
    every(loadSchedules);
  } catch (exc) {
    $("schedule-form-error").textContent = String(exc.message || exc);
  }
}

// -- graphs, and starting a run -------------------------------------------------------

let graphList = { at: 0, items: [] };

async function storedGraphs() {
  if (Date.now() - graphList.at > 5000) graphList = { at: Date.now(), items: await api("/api/graphs") };
  return graphList.items;
}

async function fillGraphChoices(select) {
  const graphs = await storedGraphs();
  const values = graphs.map((g) => g.agent + "/" + g.name);
  if (select.dataset.values === values.join("\n")) return;
  const had = select.value;
  select.replaceChildren(...values.map((v) => { const o = el("option", v); o.value = v; return o; }));
  select.dataset.values = values.join("\n");
  if (values.includes(had)) select.value = had;
}

async function loadStartForm() {
  try {
    await fillGraphChoices($("start-graph"));
  } catch (exc) {
    $("start-error").textContent = String(exc.message || exc);
  }
}

async function startRun() {
  const [agent, name] = $("start-graph").value.split("/");
  const text = $("start-input").value;
  const body = { agent, name };
  try {
    if (text !== "") body.input = $("start-json").checked ? JSON.parse(text) : text;
    const view = await api("/api/runs", { method: "POST", body });
    $("start-error").textContent = "";
    $("start-input").value = "";
    const served = await servedNote();
    noteAfterRoute = served ? "Started, but no process serves this mesh: the run waits until one starts " +
      "(`plait worker`, or `plait serve --serve-runs`)." : "";
    location.hash = "#/run/" + encodeURIComponent(view.run_id);
  } catch (exc) {
    $("start-error").textContent = String(exc.message || exc);
  }
}

async function loadGraphs() {
  const graphs = await storedGraphs();
  const body = $("graphs-body");
  body.replaceChildren();
  for (const graph of graphs) {
    const row = el("tr");
    row.dataset.graph = graph.agent + "/" + graph.name;
    const versions = el("div");
    for (const version of graph.versions) {
      const link = el("a", "v" + version);
      link.href = "#/graphs?" + new URLSearchParams({ agent: graph.agent, name: graph.name, version: String(version) });
      link.dataset.version = String(version);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        showVersion(graph.agent, graph.name, version);
      });
      versions.append(link, " ");
    }
    row.append(
      cell("graph", graph.agent + "/" + graph.name),
      cell("latest", "v" + graph.latest),
      cell("versions", versions),
      cell("description", graph.description || "", "muted"),
    );
    body.append(row);
  }
  $("graphs-empty").hidden = graphs.length > 0;
}

async function showVersion(agent, name, version) {
  const path = "/api/graphs/" + encodeURIComponent(agent) + "/" + encodeURIComponent(name);
  const query = "?version=" + version;
  const [view, drawing] = await Promise.all([api(path + query), api(path + "/drawing" + query)]);
  $("graph-version-title").textContent = agent + "/" + name + " v" + version;
  const meta = $("graph-version-meta");
  meta.replaceChildren("imported ", when(view.imported_at), " · sha256 " + view.sha256.slice(0, 16) +
    " · " + drawing.nodes.length + " nodes, " + drawing.edges.length + " edges");
  drawGraph($("graph-version-drawing"), drawing, {});
  $("graph-version").hidden = false;
}

// -- agents, topics, cluster ----------------------------------------------------------

async function loadAgents() {
  const view = await api("/api/agents");
  $("profiles-body").replaceChildren(...view.profiles.map((p) => {
    const row = el("tr");
    row.dataset.profile = p.name;
    row.append(cell("profile", p.name), cell("model", p.model || "(the process's default)", "muted"),
      cell("tools", p.tools.join(", ")), cell("delegates", p.delegates.join(", ")));
    return row;
  }));
  $("actors-body").replaceChildren(...view.actors.map((a) => {
    const row = el("tr");
    row.dataset.actor = a.name;
    row.append(cell("actor", a.name), cell("status", a.status), cell("topics", a.topics.join(", ")),
      cell("backlog", a.backlog), cell("turns", a.turns),
      cell("today", a.tokens_today + " tokens, $" + a.dollars_today.toFixed(4)),
      cell("created", when(a.created_at)));
    return row;
  }));
  $("actors-empty").hidden = view.actors.length > 0;
}

async function loadTopics() {
  const view = await api("/api/topics");
  $("topics-body").replaceChildren(...view.items.map((t) => {
    const row = el("tr");
    row.dataset.topic = t.name;
    row.append(cell("topic", t.name, "id"), cell("unread", t.held), cell("subscribers", t.subscribers.join(", ")));
    return row;
  }));
  $("topics-more").textContent = view.truncated ? "showing " + view.items.length + " of " + view.total + " topics" :
    view.total === 0 ? "No topics." : "";
}

async function loadCluster() {
  const view = await api("/api/cluster");
  showUnserved(view.served);
  const waiting = view.backlog.reduce((a, b) => a + b, 0);
  $("cluster-summary").textContent = (view.served ? "Served" : "Not served") + " · " +
    view.heartbeats.length + " process(es) · " + view.partitions + " partitions, " +
    view.unheld.length + " unheld · backlog " + waiting + " message(s)";
  const beats = new Map(view.heartbeats.map((b) => [b.host, b]));
  const hosts = [...new Set([...view.members.map((m) => m.host), ...beats.keys()])].sort();
  const members = new Map(view.members.map((m) => [m.host, m]));
  $("members-body").replaceChildren(...hosts.map((host) => {
    const m = members.get(host);
    const b = beats.get(host);
    const row = el("tr");
    row.dataset.host = host;
    const serves = (m || b).serves === "all" ? "every run" : "run " + ((b && b.run_id) || "");
    row.append(cell("host", host, "id"), cell("pid", (m || b).pid), cell("serves", serves),
      cell("partitions", m ? m.held.join(", ") : ""), cell("in flight", m ? m.in_flight : ""),
      cell("since", b ? when(b.started) : ""), cell("beat", b ? when(b.beat) : ""));
    return row;
  }));
  const unheld = new Set(view.unheld);
  $("partitions").replaceChildren(...view.backlog.map((count, n) => {
    const item = el("li", n + ": " + count, unheld.has(n) ? "unheld" : "");
    item.dataset.partition = String(n);
    item.title = unheld.has(n) ? "no live process holds it" : "held";
    return item;
  }));
}

// -- wiring ---------------------------------------------------------------------------

function wirePages() {
  $("inbox-search").addEventListener("submit", (event) => {
    event.preventDefault();
    inboxFilter = { q: $("inbox-q").value.trim(), agent: $("inbox-agent").value.trim() };
    $("inbox-list").replaceChildren();
    every(loadInbox);
  });
  $("schedule-form").addEventListener("submit", (event) => {
    event.preventDefault();
    createSchedule();
  });
  $("start-form").addEventListener("submit", (event) => {
    event.preventDefault();
    startRun();
  });
}
