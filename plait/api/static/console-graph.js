// Draws a graph (the API's GraphDrawing: nodes placed by layer and slot, edges by
// kind) as SVG, top to bottom, scaled to its box's width: the current node marked,
// each node's visit count shown. Names are set as SVG text nodes, never as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const BOX_W = 150;
const BOX_H = 46;
const GAP_X = 30;
const GAP_Y = 48;
const MARGIN = 16;

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function clip(text, room) {
  return text.length > room ? text.slice(0, room - 1) + "…" : text;
}

// Where each node's box sits: its layer is its row, its slot its place in the row,
// each row centred on the widest.
function placeNodes(drawing) {
  const widths = new Map();
  for (const node of drawing.nodes) widths.set(node.layer, Math.max(widths.get(node.layer) || 0, node.slot + 1));
  const most = Math.max(1, ...widths.values());
  const width = MARGIN * 2 + most * BOX_W + (most - 1) * GAP_X;
  const places = new Map();
  for (const node of drawing.nodes) {
    const inRow = widths.get(node.layer);
    const rowWidth = inRow * BOX_W + (inRow - 1) * GAP_X;
    const x = (width - rowWidth) / 2 + node.slot * (BOX_W + GAP_X);
    const y = MARGIN + node.layer * (BOX_H + GAP_Y);
    places.set(node.id, { x, y });
  }
  const height = MARGIN * 2 + Math.max(1, drawing.layers) * (BOX_H + GAP_Y) - GAP_Y;
  return { places, width, height };
}

const ROOM = 90;

// Whether an edge leads back up (a loop) or along a row: drawn round the right side.
function back(places, edge) {
  const from = places.get(edge.source);
  const to = places.get(edge.target);
  return Boolean(from && to && to.y <= from.y);
}

// The path of an edge, and where its label goes. An edge down to a later row is a
// curve between the boxes; one back up (a loop) or along a row goes round the right,
// past every box (`right` is the drawing's right edge), its label in the room there.
function edgePath(from, to, right) {
  const x1 = from.x + BOX_W / 2;
  const x2 = to.x + BOX_W / 2;
  if (to.y > from.y) {
    const y1 = from.y + BOX_H;
    const y2 = to.y;
    const mid = (y1 + y2) / 2;
    return { d: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`, lx: (x1 + x2) / 2 + 4, ly: mid - 2 };
  }
  const y1 = from.y + BOX_H / 2;
  const y2 = to.y + BOX_H / 2;
  const xr = right + 10;
  return {
    d: `M${from.x + BOX_W},${y1} C${xr},${y1} ${xr},${y2} ${to.x + BOX_W},${y2}`,
    lx: xr, ly: (y1 + y2) / 2,
  };
}

// Draws `drawing` into `box` (replacing what was there). `marks`: current (node ids),
// visits (node id → count), failed (node ids).
function drawGraph(box, drawing, marks) {
  const current = new Set((marks && marks.current) || []);
  const failed = new Set((marks && marks.failed) || []);
  const visits = (marks && marks.visits) || {};
  const { places, width, height } = placeNodes(drawing);
  const room = drawing.edges.some((e) => back(places, e)) ? ROOM : 0;  // loops' labels
  const root = svg("svg", { viewBox: `0 0 ${width + room} ${height}`, role: "img" });
  root.style.maxWidth = (width + room) * 1.2 + "px";
  root.append(svg("title", {}, drawing.agent + "/" + drawing.name + " v" + drawing.version));
  const defs = svg("defs");
  const arrow = "arrow-" + (box.id || "graph");
  const marker = svg("marker", { id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z" }));
  defs.append(marker);
  root.append(defs);
  const labels = [];
  for (const edge of drawing.edges) {
    const from = places.get(edge.source);
    const to = places.get(edge.target);
    if (!from || !to) continue;
    const g = svg("g", { class: "edge " + edge.kind });
    g.dataset.source = edge.source;
    g.dataset.target = edge.target;
    const path = edgePath(from, to, width - MARGIN);
    g.append(svg("path", { d: path.d, "marker-end": "url(#" + arrow + ")" }));
    root.append(g);
    if (edge.label) {  // drawn over the boxes, after them
      const label = svg("g", { class: "edge-label " + edge.kind });
      label.append(svg("text", { x: path.lx, y: path.ly }, clip(edge.label, 12)));
      labels.push(label);
    }
  }
  for (const node of drawing.nodes) {
    const at = places.get(node.id);
    const classes = ["node"];
    if (node.entry) classes.push("entry");
    if (visits[node.id]) classes.push("visited");
    if (failed.has(node.id)) classes.push("failed");
    if (current.has(node.id)) classes.push("current");
    const g = svg("g", { class: classes.join(" "), transform: `translate(${at.x},${at.y})` });
    g.dataset.node = node.id;
    g.dataset.visits = String(visits[node.id] || 0);
    g.append(svg("title", {}, node.id + " (" + node.kind + ")"));
    g.append(svg("rect", { width: BOX_W, height: BOX_H, rx: node.kind === "human" ? 18 : 5 }));
    g.append(svg("text", { x: 10, y: 19, class: "name" }, clip(node.id, 17)));
    g.append(svg("text", { x: 10, y: 36, class: "kind" }, node.kind.replace(/_/g, " ")));
    if (visits[node.id]) {
      g.append(svg("text", { x: BOX_W - 8, y: 36, "text-anchor": "end", class: "count" }, "×" + visits[node.id]));
    }
    if (current.has(node.id)) {
      g.append(svg("text", { x: BOX_W - 8, y: 19, "text-anchor": "end", class: "count now" }, "now"));
    }
    root.append(g);
  }
  root.append(...labels);
  box.replaceChildren(root);
}
