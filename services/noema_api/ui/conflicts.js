// Conflicts: recorded contradictions between facts, with both sides and the rule.

import { api } from "./api.js";
import { dataTable } from "./controls.js";
import { fill, fmtTime, guarded, h } from "./dom.js";
import { openDetail } from "./memory.js";
import { requireWorkspace } from "./state.js";

export function conflictsView() {
  const table = h("div", {});
  guarded(async () => {
    const page = await api("GET", "/v1/conflicts", { params: { workspace: requireWorkspace(), limit: 200 } });
    const side = (id, content, agent) => [h("a", { onclick: () => openDetail(id) }, content), h("div", { class: "meta" }, agent || "")];
    fill(table, dataTable(["when", "domain / topic", "kept", "superseded", "rule"], page.items, (c) => [
      fmtTime(c.created_at), `${c.domain} / ${c.topic || ""}`,
      h("td", {}, side(c.winner_id, c.winner_content, c.winner_agent)),
      h("td", {}, side(c.loser_id, c.loser_content, c.loser_agent)),
      h("td", {}, c.rule, h("div", { class: "meta" }, c.detail || "")),
    ], "no conflicts recorded"));
  });
  return [h("h2", {}, "Conflicts between facts"), table];
}
