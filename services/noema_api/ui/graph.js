// The knowledge graph: a memory's two-hop neighbourhood (one API request), drawn as an SVG.

import { api } from "./api.js";
import { field, filterForm, input } from "./controls.js";
import { fill, fmtNum, h } from "./dom.js";
import { openDetail } from "./memory.js";
import { state } from "./state.js";

export function graphView() {
  const canvas = h("div", {});
  const form = filterForm(async (values) => {
    state.graphRoot = values.root.trim();
    fill(canvas);
    await drawGraph(canvas, state.graphRoot);
  },
  field("memory id (or its first 6+ characters)", input("root", 38, { required: true, value: state.graphRoot })),
  h("button", { class: "primary" }, "Show neighbourhood"));
  if (state.graphRoot) queueMicrotask(() => form.requestSubmit());
  return [form, h("p", { class: "meta" }, "Two hops of relationship edges around a memory (supports, contradicts, supersedes, episodic_next, …). Click a node for its detail."), canvas];
}

const RELATION_COLORS = { contradicts: "#d92d20", supersedes: "#7a5af8", supports: "#12b76a", episodic_next: "#98a2b3" };
const NODE_COLORS = { root: "#3559c7", active: "#0ba5ec", retracted: "#b42318", superseded: "#667085", archived: "#98a2b3", erased: "#d0d5dd" };

/** A small force-directed layout: nodes repel, edges pull, the root stays in the centre.
 *  Deterministic (rings by hop as the start), so the same neighbourhood always looks the same. */
function layout(nodes, edges, size) {
  const centre = size / 2;
  const at = new Map();
  const rings = [0, 1, 2].map((depth) => nodes.filter((n) => n.depth === depth));
  rings.forEach((ring, depth) => ring.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / Math.max(ring.length, 1) + depth * 0.7 - Math.PI / 2;
    at.set(n.id, { x: centre + depth * 120 * Math.cos(angle), y: centre + depth * 120 * Math.sin(angle) });
  }));
  const links = edges.filter((e) => at.has(e.from_id) && at.has(e.to_id));
  for (let step = 0; step < 300; step += 1) {
    const cooling = 1 - step / 300;
    const force = new Map(nodes.map((n) => [n.id, { x: 0, y: 0 }]));
    for (const a of nodes) {
      for (const b of nodes) {
        if (a === b) continue;
        const pa = at.get(a.id);
        const pb = at.get(b.id);
        const dx = pa.x - pb.x || 0.01;
        const dy = pa.y - pb.y || 0.01;
        const d2 = Math.max(dx * dx + dy * dy, 25);
        const push = 9000 / d2;
        force.get(a.id).x += (push * dx) / Math.sqrt(d2);
        force.get(a.id).y += (push * dy) / Math.sqrt(d2);
      }
    }
    for (const e of links) {
      const pa = at.get(e.from_id);
      const pb = at.get(e.to_id);
      const dx = pb.x - pa.x;
      const dy = pb.y - pa.y;
      const pull = 0.02 * (Math.hypot(dx, dy) - 130);
      force.get(e.from_id).x += pull * dx / (Math.hypot(dx, dy) || 1) * 10;
      force.get(e.from_id).y += pull * dy / (Math.hypot(dx, dy) || 1) * 10;
      force.get(e.to_id).x -= pull * dx / (Math.hypot(dx, dy) || 1) * 10;
      force.get(e.to_id).y -= pull * dy / (Math.hypot(dx, dy) || 1) * 10;
    }
    for (const n of nodes) {
      if (n.depth === 0) continue;
      const p = at.get(n.id);
      const f = force.get(n.id);
      p.x = Math.min(size - 30, Math.max(30, p.x + Math.max(-20, Math.min(20, f.x)) * cooling));
      p.y = Math.min(size - 20, Math.max(20, p.y + Math.max(-20, Math.min(20, f.y)) * cooling));
    }
  }
  return new Map([...at].map(([id, p]) => [id, [p.x, p.y]]));
}

async function drawGraph(canvas, rootId) {
  // One request: the API walks the two hops (at most 40 memories) in the read model.
  const found = await api("GET", `/v1/memories/${encodeURIComponent(rootId)}/neighbourhood`);
  const nodes = new Map(found.nodes.map((n) => [n.id, n]));
  const edges = new Map(found.edges.map((e) => [e.id, e]));
  const size = 640;
  const position = layout([...nodes.values()], [...edges.values()], size);
  const svg = h("svg", { viewBox: `0 0 ${size} ${size}`, width: "100%", style: "max-width:760px;background:#fff;border:1px solid var(--line);border-radius:6px" },
    [...edges.values()].filter((e) => position.has(e.from_id) && position.has(e.to_id)).map((e) => {
      const [x1, y1] = position.get(e.from_id);
      const [x2, y2] = position.get(e.to_id);
      return h("line", { x1, y1, x2, y2, style: `stroke:${RELATION_COLORS[e.relation] || "#98a2b3"}` }, h("title", {}, `${e.relation} (${fmtNum(e.confidence, 2)}, ${e.source})`));
    }),
    [...nodes.values()].map((n) => {
      const [x, y] = position.get(n.id);
      const fill = n.depth === 0 ? NODE_COLORS.root : NODE_COLORS[n.status] || NODE_COLORS.archived;
      return h("g", {},
        h("circle", { cx: x, cy: y, r: n.depth === 0 ? 11 : 8, fill, onclick: () => openDetail(n.id) }, h("title", {}, `${n.content} (${n.status})`)),
        h("text", x > size * 0.6 ? { x: x - 12, y: y + 4, "text-anchor": "end" } : { x: x + 12, y: y + 4 }, n.content.length > 28 ? `${n.content.slice(0, 27)}…` : n.content));
    }));
  fill(canvas, svg,
    h("p", { class: "legend" }, "edges: ",
      Object.entries(RELATION_COLORS).map(([rel, color]) => h("span", {}, h("i", { style: `background:${color}` }), rel)),
      h("span", {}, "other relations grey")),
    h("p", { class: "legend" }, "memories: ",
      Object.entries(NODE_COLORS).map(([status, color]) => h("span", {}, h("i", { style: `background:${color};border-radius:50%` }), status === "root" ? "the one asked for" : status)),
      h("span", {}, `${nodes.size} memories, ${edges.size} edges${found.truncated ? " (more beyond the first 40)" : ""}`)));
}
