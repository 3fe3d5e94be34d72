// Form controls shared by the views: menus from the vocabulary, filter forms, tables, in-page dialogs.

import { formValues, guarded, h, showError } from "./dom.js";
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

/** Ask in an in-page dialog: one labelled field per entry of `fields` ({ name, label, value,
 *  long }), all required. Resolves to the values (trimmed) when confirmed, or null when cancelled. */
export function ask(title, fields, confirm = "OK") {
  const controls = fields.map(({ name, value = "", long = false }) => (long
    ? h("textarea", { name, rows: 4, required: true }, value)
    : h("input", { name, value, required: true, autocomplete: "off" })));
  // Enter submits with the form's only submit button, OK; Cancel (and Escape) close it unanswered.
  // A blank answer (spaces only) keeps the dialog open on that field, as an empty one does.
  const blankOne = () => controls.find((c) => !c.value.trim());
  const form = h("form", {
    method: "dialog",
    onsubmit: (event) => {
      const blank = blankOne();
      if (blank) {
        event.preventDefault();
        blank.value = "";
        blank.reportValidity();
      }
    },
  },
    h("h2", {}, title),
    fields.map(({ label }, i) => h("label", { class: "field" }, label, controls[i])),
    h("menu", {},
      h("button", { type: "button", onclick: () => dialog.close("cancel") }, "Cancel"), " ",
      h("button", { value: "ok" }, confirm)));
  const dialog = h("dialog", { class: "ask" }, form);
  document.body.append(dialog);
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const values = Object.fromEntries(fields.map(({ name }, i) => [name, controls[i].value.trim()]));
      dialog.remove();
      resolve(dialog.returnValue === "ok" && Object.values(values).every(Boolean) ? values : null);
    });
    dialog.showModal();
    controls[0].focus();
  });
}

/** Ask why (recorded in the audit log); null when cancelled. */
export async function askReason(question) {
  const answer = await ask(question, [{ name: "reason", label: "Reason (recorded in the audit log)" }]);
  return answer && answer.reason;
}

/** A "Supersede…" button: asks for the replacing text and a reason, then calls `send(text, reason)`. */
export function supersedeButton(what, current, send) {
  return h("button", {
    onclick: async () => {
      const answer = await ask(`Supersede this ${what}`, [
        { name: "text", label: `The ${what} that replaces it`, value: current, long: true },
        { name: "reason", label: "Why (recorded in the audit log)" },
      ], "Supersede");
      if (answer && answer.text === current) showError(`The ${what} is unchanged: nothing to supersede.`);
      else if (answer) guarded(() => send(answer.text, answer.reason));
    },
  }, "Supersede…");
}

export const input = (name, size, extra = {}) => h("input", { name, size, ...extra });
export const field = (label, control) => h("label", {}, label, control);
