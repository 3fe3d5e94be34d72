// A memory: its card in lists, and the detail panel (provenance, relationships, citing events) with
// the operator actions (inaccurate, correct, archive, restore) — none for an erased memory.

import { api } from "./api.js";
import { ask, askReason } from "./controls.js";
import { $, badge, fill, fmtNum, fmtTime, guarded, h, short, showError } from "./dom.js";
import { nav } from "./nav.js";
import { state } from "./state.js";

export function memoryMeta(m) {
  return h("div", { class: "meta" },
    badge(m.status), badge(m.kind, "kind"), badge(m.epistemic_kind, "kind"),
    h("span", {}, `${m.workspace}/${m.mind || "-"}`),
    m.domain ? h("span", {}, `[${m.domain}${m.topic ? ` / ${m.topic}` : ""}]`) : null,
    h("span", { class: "mono", title: m.id }, short(m.id)),
    h("span", {}, fmtTime(m.happened_at || m.created_at)));
}

/** A memory's content as shown: said to be erased when it was (docs/privacy.md), never blank. */
export function contentText(m) {
  return m.status === "erased" || m.erased_at ? `(content erased${m.erased_at ? ` at ${fmtTime(m.erased_at)}` : ""})` : m.content;
}

export function memoryCard(m, extra = null) {
  return h("div", { class: `card ${m.status}`, onclick: () => openDetail(m.id) },
    h("div", { class: "content" }, contentText(m)), memoryMeta(m), extra);
}

export async function openDetail(id) {
  const panel = $("#detail");
  const asked = state.workspace;
  const detail = await guarded(() => api("GET", `/v1/memories/${encodeURIComponent(id)}`));
  if (!detail || state.workspace !== asked) return; // the operator moved to another workspace meanwhile
  const m = detail.memory;
  state.detailId = m.id;
  fill(panel,
    h("div", { class: "actions" }, h("button", { onclick: () => { panel.hidden = true; } }, "Close"),
      h("button", { onclick: () => { state.graphRoot = m.id; nav.switchTab("graph"); } }, "Show in graph"),
      h("button", { onclick: () => { state.whyId = m.id; nav.switchTab("why"); } }, "Why?")),
    h("h2", {}, contentText(m)),
    memoryMeta(m),
    statusNotice(m, detail.citing_events),
    m.superseded_by ? h("p", {}, "Superseded by ", h("a", { onclick: () => openDetail(m.superseded_by) }, short(m.superseded_by))) : null,
    operatorActions(m),
    h("h3", {}, "Record"),
    h("table", {}, h("tbody", {},
      ["confidence", "importance", "salience", "credibility", "activation", "recall_count", "mention_count", "memory_type",
        "veracity", "channel", "source", "session", "valid_until", "created_at", "updated_at"]
        .filter((key) => m[key] !== undefined && m[key] !== null)
        .map((key) => h("tr", {}, h("th", {}, key), h("td", {}, fieldText(key, m[key])))))),
    h("h3", {}, "Provenance"),
    detail.origin ? eventBlock(detail.origin, "origin event") : h("p", { class: "empty" }, "no origin event recorded"),
    detail.source_observations.length ? h("div", {},
      detail.source_observations.map((s) => h("p", { class: "meta" }, "source observation ", h("span", { class: "mono" }, short(s.id)),
        s.decision ? ` — ${s.decision.admitted ? "admitted" : "not admitted"} by attention (score ${fmtNum(s.decision.score)}${s.decision.reason && s.decision.reason !== "admitted" ? `: ${s.decision.reason}` : ""})` : ""))) : null,
    h("h3", {}, `Relationships (${detail.relationships.length})`),
    detail.relationships.length ? h("table", {}, h("tbody", {}, detail.relationships.map((r) => {
      const other = r.direction === "out" ? r.to_id : r.from_id;
      return h("tr", {}, h("td", {}, r.direction === "out" ? `→ ${r.relation}` : `← ${r.relation}`),
        h("td", {}, h("a", { onclick: () => openDetail(other) }, r.other_content || short(other))),
        h("td", { class: "num" }, fmtNum(r.confidence, 2)), h("td", {}, h("span", { class: "meta" }, r.source)));
    }))) : h("p", { class: "empty" }, "none"),
    h("h3", {}, `Events citing it (${detail.citing_events.length})`),
    detail.citing_events.map((e) => eventBlock(e)),
    detail.embeddings.length ? h("p", { class: "meta" }, "vectors: ", detail.embeddings.map((e) => `${e.model} (${e.dimensions})`).join(", ")) : null,
  );
  panel.hidden = false;
}

function fieldText(key, value) {
  if (typeof value === "number") return key.endsWith("_count") ? String(value) : fmtNum(value);
  if (key.endsWith("_at") || key === "valid_until") return fmtTime(value);
  return String(value);
}

const STATUS_ACTIONS = { retracted: "retract", archived: "archive", superseded: "correct" };

/** Why a memory is not active: the operator action that made it so (who, when, why), if any. */
function statusNotice(m, citing) {
  if (m.status === "active") return null;
  // Citing events come newest first: the first matching action is the one that set this status.
  const action = citing.find((e) => e.type.startsWith("operator.action") && e.payload.action === STATUS_ACTIONS[m.status]);
  const what = {
    retracted: "Retracted: marked inaccurate. It stays for provenance, readable here and in lists, and is left out of normal recall (search with status retracted to find it).",
    archived: "Archived: kept for provenance and left out of normal recall.",
    superseded: "Superseded by a newer version; kept for provenance and left out of normal recall.",
    erased: "Erased: its content is gone for good (noemactl erase; the audit log has who, when and why). Its record stays for provenance; nothing can be done to it.",
  }[m.status];
  return h("div", { class: `notice ${m.status}` }, what,
    action ? h("div", { class: "meta" }, `${action.actor}, ${fmtTime(action.occurred_at)}: “${action.payload.reason}”`) : null);
}

export function eventBlock(e, label = "") {
  const payload = { ...e.payload };
  if (Array.isArray(payload.vector)) payload.vector = `[${payload.vector.length} numbers]`;
  return h("details", {},
    h("summary", {}, `${label ? `${label}: ` : ""}${e.type} #${e.seq} by ${e.actor}, ${fmtTime(e.occurred_at)}`),
    h("pre", {}, JSON.stringify({ id: e.id, subject: e.subject, causation_id: e.causation_id, correlation_id: e.correlation_id, payload }, null, 2)));
}

function operatorActions(m) {
  if (m.status === "erased") return null; // the API refuses every action on it (409)
  // An action changes the memory now, whatever it was then: a past state is only read.
  if (state.asOf) return h("p", { class: "meta past" }, "Read as of a past point: empty the as of field to act on this memory now.");
  // Each action is an operator_action event with the token's name and the reason (the audit log).
  const act = (call) => guarded(async () => {
    await call();
    await openDetail(m.id);
    nav.refreshListing();
  });
  const id = encodeURIComponent(m.id);
  const retract = async () => {
    const reason = await askReason("Why is this memory inaccurate?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/retract`, { body: { reason } }));
  };
  const correct = async () => {
    const answer = await ask("Correct this memory", [
      { name: "content", label: "Corrected content", value: m.content, long: true },
      { name: "reason", label: "Why (recorded in the audit log)" },
    ], "Correct");
    if (answer && answer.content === m.content) showError("The content is unchanged: nothing to correct.");
    else if (answer) act(() => api("POST", `/v1/memories/${id}/correct`, { body: answer }));
  };
  const archive = async () => {
    const reason = await askReason("Why archive this memory?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/archive`, { body: { reason } }));
  };
  const restore = async () => {
    const reason = await askReason("Why restore this memory?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/restore`, { body: { reason } }));
  };
  const active = m.status === "active";
  return h("div", { class: "actions" },
    active ? h("button", { class: "danger", onclick: retract }, "Inaccurate…") : null,
    active ? h("button", { onclick: correct }, "Correct…") : null,
    active ? h("button", { onclick: archive }, "Archive…") : null,
    !active && m.status !== "superseded" ? h("button", { onclick: restore }, "Restore…") : null);
}
