// Audit: the event log, filtered by type and actor, paged back in time.

import { api } from "./api.js";
import { field, filterForm, input } from "./controls.js";
import { fill, h } from "./dom.js";
import { eventBlock } from "./memory.js";
import { requireWorkspace } from "./state.js";

export function auditView() {
  const list = h("div", {});
  let before = "";
  let fresh = true;
  const more = h("button", { hidden: true, onclick: () => { fresh = false; form.requestSubmit(); } }, "Older");
  const form = filterForm(async (values) => {
    if (fresh) { before = ""; fill(list); }
    fresh = true;
    const page = await api("GET", "/v1/audit", { params: { ...values, workspace: requireWorkspace(), before, limit: 50 } });
    list.append(...page.items.map((e) => eventBlock(e)));
    if (!list.childElementCount) list.append(h("p", { class: "empty" }, "no events"));
    before = page.next_before ?? "";
    more.hidden = !page.next_before;
  },
  field("event type", input("type", 18, { placeholder: "operator.action" })),
  field("actor", input("actor", 14)),
  h("button", { class: "primary" }, "Show"));
  queueMicrotask(() => form.requestSubmit());
  return [form, list, more];
}
