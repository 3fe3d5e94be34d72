// Timeline: a workspace's memories in the order things happened, by day.

import { api } from "./api.js";
import { field, filterForm, input, select } from "./controls.js";
import { fill, h, localPeriod } from "./dom.js";
import { memoryCard } from "./memory.js";
import { requireWorkspace, state } from "./state.js";

export function timelineView() {
  const list = h("div", {});
  const form = filterForm(async (values) => {
    const page = await api("GET", "/v1/timeline", { params: { ...localPeriod(values), workspace: requireWorkspace(), limit: 200 } });
    let day = "";
    const rows = [];
    for (const m of page.items) {
      const d = new Date(m.happened_at || m.created_at).toDateString();
      if (d !== day) { day = d; rows.push(h("div", { class: "day" }, d)); }
      rows.push(memoryCard(m));
    }
    fill(list, rows.length ? rows : h("p", { class: "empty" }, `no memories in workspace ${state.workspace}${values.since || values.until ? " in this period" : " (is the name right?)"}`));
  },
  field("mind", input("mind", 8)),
  field("since", input("since", 10, { type: "date" })),
  field("until", input("until", 10, { type: "date" })),
  field("order", select("order", ["desc", "asc"], "desc")),
  h("button", { class: "primary" }, "Show"));
  queueMicrotask(() => form.requestSubmit());
  return [form, list];
}
