// Search: the agents' ranking, with each result's score explained.

import { api } from "./api.js";
import { field, filterFields, filterForm, input, select, vocab } from "./controls.js";
import { fill, fmtNum, h, localPeriod } from "./dom.js";
import { memoryCard } from "./memory.js";
import { PARTS, breakdown, componentTable } from "./scores.js";
import { requireWorkspace, state } from "./state.js";

export function searchView() {
  const results = h("div", {});
  const form = filterForm(async (values) => {
    const params = { ...localPeriod(values), workspace: requireWorkspace(), explain: true, limit: 20 };
    const found = await api("GET", "/v1/memories/search", { params });
    const positive = (c) => PARTS.reduce((sum, [key]) => sum + Math.max(0, c[key] || 0), 0);
    const scale = Math.max(0, ...found.results.map((hit) => positive(hit.components)));
    fill(results,
      h("p", { class: "meta" }, `${found.results.length} results · mode ${found.mode}${found.intent ? ` · intent ${found.intent}` : ""}`,
        found.weights ? ` · voice weights ${Object.entries(found.weights).map(([k, v]) => `${k} ${v}`).join(", ")}` : ""),
      found.results.length ? found.results.map((hit) => memoryCard(hit.memory, h("div", {},
        h("div", { class: "meta" }, `score ${fmtNum(hit.score)}`, hit.score <= 0 ? " · weak match" : ""), breakdown(hit.components, scale),
        h("details", { onclick: (e) => e.stopPropagation() }, h("summary", {}, "all components"), componentTable(hit.components)))))
        : h("p", { class: "empty" }, `nothing found in workspace ${state.workspace} (is the name right?)`));
  },
  field("query", input("q", 32, { required: true, placeholder: "what do we know about deploys?" })),
  field("mode", select("mode", vocab("search_modes"), "hybrid")),
  filterFields(),
  h("button", { class: "primary" }, "Search"));
  return [form, results];
}
