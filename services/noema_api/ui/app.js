// Noema memory explorer: a page over the operator API (/v1/...), nothing else. Every figure it shows
// comes from the API the agents' tools share, so its ranking is the agents' ranking. Data is put in
// the page with textContent only (never parsed as HTML): memory contents are untrusted input.

const state = {
  token: sessionStorage.getItem("noema.token") || "",
  workspace: localStorage.getItem("noema.workspace") || "",
  tab: "search",
  graphRoot: "",
  // The newest event-stream sequence this tab's writes stored: every read asks the API to wait
  // until the read model has applied it (after_seq), so a change shows at once, without sleeps.
  seenSeq: 0,
  vocabulary: null,
};

// ---------- the API ----------------------------------------------------------------------------

class ApiError extends Error {}

/** Call the operator API; `params` become the query string (empty values left out). */
async function api(method, path, { params = {}, body } = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "" && value !== false) query.set(key, String(value));
  }
  if (method === "GET" && state.seenSeq > 0 && path.startsWith("/v1/") && path !== "/v1/vocabulary") query.set("after_seq", String(state.seenSeq));
  const url = path + (query.toString() ? `?${query}` : "");
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) {
    state.token = "";
    sessionStorage.removeItem("noema.token");
    updateSignin();
    askToken();
    throw new ApiError(data.error || "sign in with an operator token");
  }
  if (!response.ok) throw new ApiError(data.error || `${response.status} ${response.statusText}`);
  const stored = Number(response.headers.get("Noema-Stream-Seq") || 0);
  if (stored > state.seenSeq) state.seenSeq = stored;
  if (response.headers.get("Noema-Caught-Up") === "false") {
    state.seenSeq = 0; // waited once in vain: later reads answer at once until the next write
    showError("The read model is behind the event stream (is the projector running?): your last change may not show yet.");
  }
  return data;
}

// ---------- building DOM safely ----------------------------------------------------------------

/** An element with attributes (on* keys become listeners) and children (strings become text). */
function h(tag, attrs = {}, ...children) {
  const el = tag === "svg" || ["line", "circle", "text", "title", "g"].includes(tag)
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style") el.style.cssText = value; // CSSOM: allowed by the page's CSP, unlike a style attribute
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const $ = (selector) => document.querySelector(selector);

/** Replace an element's children (arrays flattened, empty values left out). */
function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false));
}
const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const fmtNum = (x, digits = 3) => (typeof x === "number" ? x.toFixed(digits) : x ?? "");
const short = (id) => (id ? String(id).slice(0, 8) : "");

function badge(text, cls = "") {
  return h("span", { class: `badge ${cls || text}` }, text);
}

function showError(error) {
  const box = $("#error");
  box.textContent = error instanceof Error ? error.message : String(error);
  box.hidden = false;
}

function clearError() {
  $("#error").hidden = true;
}

/** Run an action, showing its error (if any) in the banner instead of losing it. */
async function guarded(action) {
  clearError();
  try {
    return await action();
  } catch (error) {
    showError(error);
    return undefined;
  }
}

function formValues(form) {
  return Object.fromEntries(new FormData(form).entries());
}

/** A form's since/until dates as the instants that bound those days in the browser's time zone:
 *  since = the start of its day, until = the end of its day (both days included). */
function localPeriod(values) {
  const day = (text, offset) => {
    const [y, m, d] = text.split("-").map(Number);
    return new Date(y, m - 1, d + offset).toISOString();
  };
  const out = { ...values };
  if (values.since) out.since = day(values.since, 0);
  if (values.until) out.until = day(values.until, 1);
  return out;
}

function requireWorkspace() {
  if (!state.workspace) throw new ApiError("enter a workspace first");
  return state.workspace;
}

// ---------- score explanation --------------------------------------------------------------------

const PARTS = [
  ["semantic", "#3559c7"],
  ["lexical", "#12b76a"],
  ["graph", "#9e77ed"],
  ["temporal", "#f79009"],
  ["activation", "#0ba5ec"],
  ["importance", "#ee46bc"],
  ["credibility", "#667085"],
  ["repo_first", "#444ce7"],
];

/** A stacked bar of what each voice and prior added to the score, then the MMR penalty (hatched),
 *  on a scale where `scale` (the best result's total) fills the bar, so weaker results look weaker. */
function breakdown(components, scale = 1) {
  const parts = PARTS.filter(([key]) => (components[key] || 0) > 0);
  const penalty = Math.min(0, components.mmr || 0);
  const width = (x) => `${Math.max(0, (100 * x) / (scale || 1))}%`;
  return h("div", {},
    h("div", { class: "bar", title: "what each part added to the score, then the MMR penalty" },
      parts.map(([key, color]) => h("span", {
        style: `width:${width(components[key])};background:${color}`,
        title: `${key} ${fmtNum(components[key])}`,
      })),
      penalty < 0 ? h("span", { class: "penalty", style: `width:${width(-penalty)}`, title: `mmr ${fmtNum(penalty)}: close to a result above` }) : null),
    h("div", { class: "legend" },
      parts.map(([key, color]) => h("span", {}, h("i", { style: `background:${color}` }), `${key} ${fmtNum(components[key])}`)),
      components.mmr ? h("span", { title: "diversity penalty: this result repeats one ranked above" }, `mmr ${fmtNum(components.mmr)}`) : null,
      components.decay !== undefined ? h("span", {}, `decay ×${fmtNum(components.decay)}`) : null));
}

function componentTable(components) {
  return h("table", {}, h("tbody", {},
    Object.entries(components).map(([key, value]) => h("tr", {}, h("th", {}, key), h("td", { class: "num" }, fmtNum(value, 4))))));
}

// ---------- memory cards and detail --------------------------------------------------------------

function memoryMeta(m) {
  return h("div", { class: "meta" },
    badge(m.status), badge(m.kind, "kind"), badge(m.epistemic_kind, "kind"),
    h("span", {}, `${m.workspace}/${m.mind || "-"}`),
    m.domain ? h("span", {}, `[${m.domain}${m.topic ? ` / ${m.topic}` : ""}]`) : null,
    h("span", { class: "mono", title: m.id }, short(m.id)),
    h("span", {}, fmtTime(m.happened_at || m.created_at)));
}

function memoryCard(m, extra = null) {
  return h("div", { class: `card ${m.status}`, onclick: () => openDetail(m.id) },
    h("div", { class: "content" }, m.content), memoryMeta(m), extra);
}

async function openDetail(id) {
  const panel = $("#detail");
  const detail = await guarded(() => api("GET", `/v1/memories/${encodeURIComponent(id)}`));
  if (!detail) return;
  const m = detail.memory;
  fill(panel,
    h("div", { class: "actions" }, h("button", { onclick: () => { panel.hidden = true; } }, "Close"),
      h("button", { onclick: () => { state.graphRoot = m.id; switchTab("graph"); } }, "Show in graph")),
    h("h2", {}, m.content),
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
  }[m.status];
  return h("div", { class: `notice ${m.status}` }, what,
    action ? h("div", { class: "meta" }, `${action.actor}, ${fmtTime(action.occurred_at)}: “${action.payload.reason}”`) : null);
}

function eventBlock(e, label = "") {
  const payload = { ...e.payload };
  if (Array.isArray(payload.vector)) payload.vector = `[${payload.vector.length} numbers]`;
  return h("details", {},
    h("summary", {}, `${label ? `${label}: ` : ""}${e.type} #${e.seq} by ${e.actor}, ${fmtTime(e.occurred_at)}`),
    h("pre", {}, JSON.stringify({ id: e.id, subject: e.subject, causation_id: e.causation_id, correlation_id: e.correlation_id, payload }, null, 2)));
}

function operatorActions(m) {
  // Each action is an operator_action event with the token's name and the reason (the audit log).
  const act = (call) => guarded(async () => {
    await call();
    await openDetail(m.id);
    refreshListing();
  });
  const id = encodeURIComponent(m.id);
  const retract = () => {
    const reason = askReason("Why is this memory inaccurate?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/retract`, { body: { reason } }));
  };
  const correct = () => {
    const content = prompt("Corrected content:", m.content);
    if (!content || content === m.content) return;
    const reason = askReason("Why correct it?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/correct`, { body: { content, reason } }));
  };
  const archive = () => {
    const reason = askReason("Why archive this memory?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/archive`, { body: { reason } }));
  };
  const restore = () => {
    const reason = askReason("Why restore this memory?");
    if (reason) act(() => api("POST", `/v1/memories/${id}/restore`, { body: { reason } }));
  };
  const active = m.status === "active";
  return h("div", { class: "actions" },
    active ? h("button", { class: "danger", onclick: retract }, "Inaccurate…") : null,
    active ? h("button", { onclick: correct }, "Correct…") : null,
    active ? h("button", { onclick: archive }, "Archive…") : null,
    !active && m.status !== "superseded" ? h("button", { onclick: restore }, "Restore…") : null);
}

// ---------- views --------------------------------------------------------------------------------

/** A closed list from GET /v1/vocabulary (the event catalog's own), loaded before the first view. */
const vocab = (name) => state.vocabulary[name].map((entry) => (typeof entry === "string" ? entry : entry.name));

function select(name, options, value = "") {
  return h("select", { name }, options.map((o) => h("option", { value: o, selected: o === value }, o || "any")));
}

function filterFields() {
  return [
    h("label", {}, "kind", select("kind", ["", ...vocab("memory_kinds")])),
    h("label", {}, "epistemic kind", select("epistemic_kind", ["", ...vocab("epistemic_kinds")])),
    h("label", {}, "status", select("status", ["", ...vocab("memory_statuses")])),
    h("label", {}, "domain", h("input", { name: "domain", size: 10 })),
    h("label", {}, "mind", h("input", { name: "mind", size: 8 })),
    h("label", {}, "since", h("input", { name: "since", type: "date" })),
    h("label", {}, "until", h("input", { name: "until", type: "date" })),
  ];
}

/** A filter form: on submit, `onSubmit(values)` runs with errors shown in the banner. */
function filterForm(onSubmit, ...fields) {
  const form = h("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      guarded(() => onSubmit(formValues(form)));
    },
  }, ...fields);
  return form;
}

/** A table of `rows` (one `cells(row)` array each), or a line saying there is nothing. */
function dataTable(columns, rows, cells, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, cells(row).map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : h("td", {}, cell)))))));
}

/** Ask why (recorded in the audit log) until given, or null when cancelled. */
function askReason(question) {
  for (;;) {
    const reason = prompt(`${question} (recorded in the audit log)`);
    if (reason === null) return null;
    if (reason.trim()) return reason.trim();
  }
}

/** A "Supersede…" button: asks for the replacing text and a reason, then calls `send(text, reason)`. */
function supersedeButton(what, current, send) {
  return h("button", {
    onclick: () => {
      const text = prompt(`The ${what} that replaces it:`, current);
      if (!text || text === current) return;
      const reason = askReason(`Why replace this ${what}?`);
      if (reason) guarded(() => send(text, reason));
    },
  }, "Supersede…");
}

const input = (name, size, extra = {}) => h("input", { name, size, ...extra });
const field = (label, control) => h("label", {}, label, control);

const views = {
  search() {
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
  },

  timeline() {
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
  },

  facts() {
    const table = h("div", {});
    const form = filterForm(async (values) => {
      const params = { ...values, workspace: requireWorkspace(), include_inactive: values.include_inactive === "on" };
      const page = await api("GET", "/v1/facts", { params });
      fill(table, dataTable(["domain", "topic", "fact", "status", "confidence", "mentions", "by", ""], page.items, (f) => [
        f.domain, f.topic || "", h("a", { onclick: () => openDetail(f.id) }, f.content), badge(f.status),
        h("td", { class: "num" }, fmtNum(f.confidence, 2)), h("td", { class: "num" }, f.mention_count), f.agent,
        f.status === "active" ? supersedeButton("fact", f.content, async (content, reason) => {
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
  },

  policies() {
    const table = h("div", {});
    const load = () => guarded(async () => {
      const page = await api("GET", "/v1/policies", { params: { workspace: requireWorkspace(), include_inactive: true } });
      fill(table, dataTable(["domain", "rule", "required role", "state", "by", ""], page.items, (p) => [
        p.domain, p.rule, p.required_role || "", badge(p.active ? "active" : "superseded"), p.proposed_by,
        p.active ? supersedeButton("rule", p.rule, async (rule, reason) => {
          await api("POST", `/v1/policies/${encodeURIComponent(p.id)}/supersede`, { body: { rule, reason } });
          load();
        }) : "",
      ], `no policies in workspace ${state.workspace}`));
    });
    const form = filterForm(async (values) => {
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
    return [form, table];
  },

  conflicts() {
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
  },

  grants() {
    const table = h("div", {});
    const load = () => guarded(async () => {
      const page = await api("GET", "/v1/grants", { params: { workspace: requireWorkspace() } });
      const other = page.access_mode === "strict" ? "compatible" : "strict";
      const switchMode = () => {
        const reason = askReason(`Switch ${state.workspace} to ${other} mode? Why?`);
        if (reason === null) return;
        guarded(async () => {
          await api("PUT", "/v1/access-mode", { body: { workspace: state.workspace, mode: other, reason } });
          load();
        });
      };
      fill(table,
        h("p", { class: "meta" }, `access mode: ${page.access_mode}`, h("button", { onclick: switchMode }, `Switch to ${other}`)),
        dataTable(["role", "domain", "access", "seeded", "changed by", "updated"], page.grants, (g) => [
          g.role, g.domain, badge(g.access, "kind"), g.seeded ? "yes" : "", g.changed_by || "", fmtTime(g.updated_at),
        ], "no grants"));
    });
    const form = filterForm(async (values) => {
      await api("PUT", "/v1/grants", { body: { ...values, workspace: requireWorkspace() } });
      load();
    },
    field("role", input("role", 10, { required: true })),
    field("domain", input("domain", 14, { required: true })),
    field("access", select("access", vocab("access_levels"), "read")),
    field("reason", input("reason", 16, { required: true })),
    h("button", { class: "primary" }, "Set grant"));
    load();
    return [form, table];
  },

  graph() {
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
  },

  audit() {
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
  },

  add() {
    const recordThen = (send) => async (values) => {
      await openDetail(await send(values)); // read after the write's sequence: it shows at once
    };
    const optional = (values, keys) => Object.fromEntries(keys.filter((k) => values[k]).map((k) => [k, values[k]]));
    const fact = filterForm(recordThen(async (values) => {
      const body = { workspace: requireWorkspace(), domain: values.domain, topic: values.topic, content: values.content,
        veracity: values.veracity, reason: values.reason, ...optional(values, ["valid_until"]) };
      const result = await api("POST", "/v1/facts", { body });
      fact.reset();
      return result.memory_id;
    }),
    field("fact", input("content", 48, { required: true })),
    field("domain", input("domain", 12, { required: true })),
    field("topic", input("topic", 12, { required: true })),
    field("veracity", select("veracity", vocab("veracities"), "stated")),
    field("valid until", input("valid_until", 10, { type: "date" })),
    field("reason", input("reason", 20, { required: true })),
    h("button", { class: "primary" }, "Propose fact"));
    const memory = filterForm(recordThen(async (values) => {
      const body = { workspace: requireWorkspace(), content: values.content, kind: values.kind, epistemic_kind: values.epistemic_kind,
        reason: values.reason, ...optional(values, ["mind", "domain", "topic", "valid_until"]) };
      const result = await api("POST", "/v1/memories", { body });
      memory.reset();
      return result.memory_id;
    }),
    field("content", input("content", 48, { required: true })),
    field("kind", select("kind", vocab("memory_kinds"), "episodic")),
    field("epistemic kind", select("epistemic_kind", vocab("epistemic_kinds"), "observation")),
    field("mind", input("mind", 10)),
    field("domain", input("domain", 12)),
    field("topic", input("topic", 12)),
    field("valid until", input("valid_until", 10, { type: "date" })),
    field("reason", input("reason", 20, { required: true })),
    h("button", { class: "primary" }, "Record memory"));
    return [
      h("h2", {}, "Propose a fact"),
      h("p", { class: "meta" }, "Checked against the active facts of its domain and topic: a repeat is counted as a mention of the existing fact (raising its confidence, up to the 0.99 a stated fact starts at), a contradiction is settled by the conflict rules (see Conflicts)."),
      fact,
      h("h2", {}, "Enter a memory"),
      h("p", { class: "meta" }, "Any kind of memory, recorded as it is. Both entries are operator actions with your token's name and the reason."),
      memory,
    ];
  },
};

// ---------- knowledge graph ----------------------------------------------------------------------

const RELATION_COLORS = { contradicts: "#d92d20", supersedes: "#7a5af8", supports: "#12b76a", episodic_next: "#98a2b3" };
const NODE_COLORS = { root: "#3559c7", active: "#0ba5ec", retracted: "#b42318", superseded: "#667085", archived: "#98a2b3" };

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

// ---------- shell ----------------------------------------------------------------------------------

const LISTING_TABS = new Set(["timeline", "facts", "policies", "conflicts", "grants", "audit"]);

/** Show the current search or list again (after a change), without touching a form being filled. */
function refreshListing() {
  const form = document.querySelector("#view form");
  if (state.tab === "search" && form && form.checkValidity()) form.requestSubmit();
  else if (LISTING_TABS.has(state.tab)) switchTab(state.tab);
}

function switchTab(tab) {
  state.tab = tab;
  for (const button of document.querySelectorAll("#tabs button")) button.classList.toggle("active", button.dataset.tab === tab);
  clearError();
  fill($("#view"), ...views[tab]());
}

function askToken() {
  const dialog = $("#token-dialog");
  if (!dialog.open) dialog.showModal();
}

function updateSignin() {
  $("#signin").textContent = state.token ? "Sign out" : "Sign in";
}

async function start() {
  state.vocabulary = await api("GET", "/v1/vocabulary");
  const workspace = $("#workspace");
  workspace.value = state.workspace;
  workspace.addEventListener("change", () => {
    state.workspace = workspace.value.trim();
    localStorage.setItem("noema.workspace", state.workspace);
    // Tabs that list on their own reload; a form being filled in (search, entry) is left alone.
    if (LISTING_TABS.has(state.tab)) switchTab(state.tab);
  });
  $("#scope").addEventListener("submit", (event) => event.preventDefault());
  $("#signin").addEventListener("click", () => {
    if (state.token) {
      state.token = "";
      sessionStorage.removeItem("noema.token");
      updateSignin();
      $("#detail").hidden = true;
      fill($("#detail"));
      switchTab(state.tab); // forms stay; nothing read with the old token does
      askToken();
    } else askToken();
  });
  $("#token-dialog").addEventListener("close", async () => {
    const dialog = $("#token-dialog");
    if (dialog.returnValue !== "ok") return;
    state.token = $("#token").value.trim();
    $("#token").value = "";
    const ok = await guarded(() => api("GET", "/v1/memories", { params: { limit: 1 } }));
    if (!ok) {
      state.token = "";
      $("#token-message").textContent = "That token was refused. Check it and try again.";
      askToken();
      return;
    }
    $("#token-message").textContent = "";
    sessionStorage.setItem("noema.token", state.token);
    updateSignin();
    switchTab(state.tab);
  });
  for (const button of document.querySelectorAll("#tabs button")) button.addEventListener("click", () => switchTab(button.dataset.tab));
  updateSignin();
  if (!state.token) askToken();
  switchTab("search");
}

start().catch(showError);
