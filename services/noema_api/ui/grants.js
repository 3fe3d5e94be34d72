// Grants: the access mode and (role, domain) grants of a workspace.

import { api } from "./api.js";
import { askReason, dataTable, field, input, presentOnlyNotice, select, vocab, writeForm } from "./controls.js";
import { badge, fill, fmtTime, guarded, h } from "./dom.js";
import { requireWorkspace, state } from "./state.js";

export function grantsView() {
  const table = h("div", {});
  const load = () => guarded(async () => {
    const page = await api("GET", "/v1/grants", { params: { workspace: requireWorkspace() } });
    const other = page.access_mode === "strict" ? "compatible" : "strict";
    const switchMode = async () => {
      const reason = await askReason(`Switch ${state.workspace} to ${other} mode? Why?`);
      if (!reason) return;
      guarded(async () => {
        await api("PUT", "/v1/access-mode", { body: { workspace: state.workspace, mode: other, reason } });
        load();
      });
    };
    fill(table,
      h("p", { class: "meta" }, `access mode: ${page.access_mode}`, state.asOf ? "" : h("button", { onclick: switchMode }, `Switch to ${other}`)),
      dataTable(["role", "domain", "access", "seeded", "changed by", "updated"], page.grants, (g) => [
        g.role, g.domain, badge(g.access, "kind"), g.seeded ? "yes" : "", g.changed_by || "", fmtTime(g.updated_at),
      ], "no grants"));
  });
  const form = writeForm(async (values) => {
    await api("PUT", "/v1/grants", { body: { ...values, workspace: requireWorkspace() } });
    load();
  },
  field("role", input("role", 10, { required: true })),
  field("domain", input("domain", 14, { required: true })),
  field("access", select("access", vocab("access_levels"), "read")),
  field("reason", input("reason", 16, { required: true })),
  h("button", { class: "primary" }, "Set grant"));
  load();
  return [presentOnlyNotice("change the grants"), form, table];
}
