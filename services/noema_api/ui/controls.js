// Form controls shared by the views: menus from the vocabulary, filter forms, tables, in-page dialogs.

import { formValues, guarded, h, showError } from "./dom.js";
import { ApiError, state } from "./state.js";

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

/** A form that records something now (a fact, a memory, a policy, a grant): while the as of field
 *  names a past point the page shows the past, so the form is disabled and `notice` (from
 *  `presentOnlyNotice`) says why; `syncPresentOnly` follows the field. */
export function writeForm(onSubmit, ...fields) {
  const form = filterForm(async (values) => {
    if (state.asOf) throw new ApiError("Read as of a past point: empty the as of field to record anything now.");
    await onSubmit(values);
  }, ...fields);
  form.classList.add("present-only");
  return form;
}

/** The line above the write forms of a view, shown while the as of field names a past point:
 *  `todo` says what emptying the field lets the operator do ("add knowledge"). */
export function presentOnlyNotice(todo) {
  return h("p", { class: "notice past-writes", role: "status", hidden: true },
    `Viewing the state as of a past point: anything entered is recorded now, not then, so these forms are off. Empty the as of field to ${todo}.`);
}

/** Disable the write forms shown (and show their notice) while the as of field names a past point;
 *  enable them again, their typed values kept, when it is emptied. */
export function syncPresentOnly() {
  const past = Boolean(state.asOf);
  for (const form of document.querySelectorAll("form.present-only")) {
    for (const control of form.elements) control.disabled = past;
  }
  for (const notice of document.querySelectorAll(".past-writes")) notice.hidden = !past;
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
