// Form controls shared by the views: menus from the vocabulary, filter forms, tables, prompts.

import { formValues, guarded, h } from "./dom.js";
import { state } from "./state.js";

/** A closed list from GET /v1/vocabulary (the event catalog's own), loaded before the first view. */
export const vocab = (name) => state.vocabulary[name].map((entry) => (typeof entry === "string" ? entry : entry.name));

export function select(name, options, value = "") {
  return h("select", { name }, options.map((o) => h("option", { value: o, selected: o === value }, o || "any")));
}

export function filterFields() {
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
export function filterForm(onSubmit, ...fields) {
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
export function dataTable(columns, rows, cells, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, cells(row).map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : h("td", {}, cell)))))));
}

/** Ask why (recorded in the audit log) until given, or null when cancelled. */
export function askReason(question) {
  for (;;) {
    const reason = prompt(`${question} (recorded in the audit log)`);
    if (reason === null) return null;
    if (reason.trim()) return reason.trim();
  }
}

/** A "Supersede…" button: asks for the replacing text and a reason, then calls `send(text, reason)`. */
export function supersedeButton(what, current, send) {
  return h("button", {
    onclick: () => {
      const text = prompt(`The ${what} that replaces it:`, current);
      if (!text || text === current) return;
      const reason = askReason(`Why replace this ${what}?`);
      if (reason) guarded(() => send(text, reason));
    },
  }, "Supersede…");
}

export const input = (name, size, extra = {}) => h("input", { name, size, ...extra });
export const field = (label, control) => h("label", {}, label, control);
