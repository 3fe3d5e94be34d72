// Facts: by domain and topic, with supersession.

import { api } from "./api.js";
import { dataTable, field, filterForm, input, supersedeButton } from "./controls.js";
import { badge, fill, fmtNum, h } from "./dom.js";
import { openDetail } from "./memory.js";
import { requireWorkspace, state } from "./state.js";

export function factsView() {
  const table = h("div", {});
  const form = filterForm(async (values) => {
    const params = { ...values, workspace: requireWorkspace(), include_inactive: values.include_inactive === "on" };
    const page = await api("GET", "/v1/facts", { params });
    fill(table, dataTable(["domain", "topic", "fact", "status", "confidence", "mentions", "by", ""], page.items, (f) => [
      f.domain, f.topic || "", h("a", { onclick: () => openDetail(f.id) }, f.content), badge(f.status),
      h("td", { class: "num" }, fmtNum(f.confidence, 2)), h("td", { class: "num" }, f.mention_count), f.agent,
      f.status === "active" && !state.asOf ? supersedeButton("fact", f.content, async (content, reason) => {
        // The new fact shows at once (read after the write's sequence); the old one turns
        // superseded when the conflicts worker has applied the replacement.
        const replaced = await api("POST", `/v1/facts/${encodeURIComponent(f.id)}/supersede`, { body: { content, reason } });
        form.requestSubmit();
        await openDetail(replaced.memory_id);
      }) : "",
    ], `no facts in workspace ${state.workspace}`));
  },
  field("domain", input("domain", 12)),
  field("topic", input("topic", 12)),
  field("include superseded", input("include_inactive", 1, { type: "checkbox" })),
  h("button", { class: "primary" }, "List"));
  queueMicrotask(() => form.requestSubmit());
  return [form, table];
}
