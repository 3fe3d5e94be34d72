// Policies: the rules every dispatch carries; propose and supersede.

import { api } from "./api.js";
import { dataTable, field, input, presentOnlyNotice, supersedeButton, writeForm } from "./controls.js";
import { badge, fill, guarded, h } from "./dom.js";
import { requireWorkspace, state } from "./state.js";

export function policiesView() {
  const table = h("div", {});
  const load = () => guarded(async () => {
    const page = await api("GET", "/v1/policies", { params: { workspace: requireWorkspace(), include_inactive: true } });
    fill(table, dataTable(["domain", "rule", "required role", "state", "by", ""], page.items, (p) => [
      p.domain, p.rule, p.required_role || "", badge(p.active ? "active" : "superseded"), p.proposed_by,
      p.active && !state.asOf ? supersedeButton("rule", p.rule, async (rule, reason) => {
        await api("POST", `/v1/policies/${encodeURIComponent(p.id)}/supersede`, { body: { rule, reason } });
        load();
      }) : "",
    ], `no policies in workspace ${state.workspace}`));
  });
  const form = writeForm(async (values) => {
    await api("POST", "/v1/policies", { body: { ...values, workspace: requireWorkspace(), required_role: values.required_role || null } });
    form.reset();
    load();
  },
  field("domain", input("domain", 12, { required: true })),
  field("rule", input("rule", 40, { required: true })),
  field("required role", input("required_role", 10)),
  field("reason", input("reason", 16, { required: true })),
  h("button", { class: "primary" }, "Propose policy"));
  load();
  return [presentOnlyNotice("propose a policy"), form, table];
}
