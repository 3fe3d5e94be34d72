// Why: an id's history (GET /v1/why/{id}) as a timeline — every step in stream order, indented under
// the step it follows from, with who and when, what it decided and the scores its event recorded.

import { api } from "./api.js";
import { field, filterForm, input } from "./controls.js";
import { fill, fmtNum, fmtTime, h, short } from "./dom.js";
import { eventBlock, openDetail } from "./memory.js";
import { requireWorkspace, state } from "./state.js";

const CAUSES = {
  observation: "observation (on the observation stream)",
  recall: "recall proposal (on the observation stream)",
  cause: "cause that is no event",
};

export function whyView() {
  const list = h("div", {});
  const form = filterForm(async (values) => {
    state.whyId = values.id.trim();
    const found = await api("GET", `/v1/why/${encodeURIComponent(state.whyId)}`, { params: { workspace: requireWorkspace() } });
    fill(list, timeline(found));
  },
  field("event, memory, fact, policy or observation id", input("id", 38, { required: true, value: state.whyId })),
  h("button", { class: "primary" }, "Why?"));
  if (state.whyId) queueMicrotask(() => form.requestSubmit());
  return [form, h("p", { class: "meta" }, "The events that name the id, the causes they follow from and what they caused, through causation and correlation ids."), list];
}

/** How deep each step is: one more than the step it follows from (a missing parent is a root). */
function depths(steps) {
  const parents = new Map(steps.map((s) => [s.id, s.parent]));
  const depth = new Map();
  const of = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    const parent = parents.get(id);
    const d = parent && parents.has(parent) && !seen.has(parent) ? of(parent, new Set([...seen, id])) + 1 : 0;
    depth.set(id, d);
    return d;
  };
  for (const s of steps) of(s.id);
  return depth;
}

/** What a payload records, scalars inline and each record of numbers (scores, components) on its own. */
function recorded(payload) {
  const plain = [];
  const scores = [];
  for (const [key, value] of Object.entries(payload || {})) {
    if (value === null || typeof value !== "object") plain.push(`${key} ${typeof value === "number" ? fmtNum(value) : String(value)}`);
    else if (!Array.isArray(value)) scores.push(h("div", { class: "meta" }, `${key}: `, Object.entries(value).map(([k, v]) => `${k} ${fmtNum(v)}`).join(" · ")));
  }
  return [plain.length ? h("div", { class: "meta" }, plain.join(" · ")) : null, ...scores];
}

function decision(d) {
  if (!d) return null;
  const parts = Object.entries(d.components || {}).map(([k, v]) => `${k} ${fmtNum(v)}`).join(" · ");
  return h("div", { class: "meta" }, `attention: ${d.admitted ? "admitted" : "not admitted"}, score ${fmtNum(d.score)}${d.reason && d.reason !== "admitted" ? ` (${d.reason})` : ""}`, parts ? ` — ${parts}` : "");
}

function memoryLink(payload) {
  const id = payload && payload.memory_id;
  return id ? h("a", { onclick: () => openDetail(id) }, `memory ${short(id)}`) : null;
}

function timeline(found) {
  const depth = depths(found.steps);
  const seqs = new Map(found.steps.filter((s) => s.event).map((s) => [s.id, s.event.seq]));
  const events = found.steps.filter((s) => s.event).length;
  return [
    h("h2", {}, `${found.subject} ${found.id} in ${found.workspace}: ${events} event(s)${found.truncated ? " (truncated)" : ""}`),
    h("ol", { class: "timeline" }, found.steps.map((s) => {
      const e = s.event;
      const cause = s.parent ? `after ${seqs.has(s.parent) ? `#${seqs.get(s.parent)}` : short(s.parent)}${s.link === "correlation" ? " (by correlation)" : ""}` : "first cause";
      return h("li", { class: s.kind, style: `margin-left:${1.4 * depth.get(s.id)}rem` },
        e ? h("div", {}, h("strong", {}, `${e.type} #${e.seq}`), ` by ${e.actor}, ${fmtTime(e.occurred_at)} · ${cause} `, memoryLink(e.payload))
          : h("div", {}, h("strong", {}, CAUSES[s.kind]), " ", h("span", { class: "mono", title: s.id }, s.id), ` · ${cause}`),
        decision(s.decision),
        e ? recorded(e.payload) : null,
        e ? eventBlock(e, "payload") : null);
    })),
  ];
}
