// Building the page safely: elements and text nodes only (never HTML parsing), and small formatters.
// Memory contents are untrusted input.

/** An element with attributes (on* keys become listeners) and children (strings become text). */
export function h(tag, attrs = {}, ...children) {
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

export const $ = (selector) => document.querySelector(selector);

/** Replace an element's children (arrays flattened, empty values left out). */
export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false));
}
export const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : "");
export const fmtNum = (x, digits = 3) => (typeof x === "number" ? x.toFixed(digits) : x ?? "");
// A UUID is shown by its first 8 characters (the title and links carry it whole); any other id
// (an observation id an agent chose) whole, since a prefix of it may name nothing or something else.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const short = (id) => (id ? (UUID.test(String(id)) ? String(id).slice(0, 8) : String(id)) : "");

export function badge(text, cls = "") {
  return h("span", { class: `badge ${cls || text}` }, text);
}

export function showError(error) {
  const box = $("#error");
  box.textContent = error instanceof Error ? error.message : String(error);
  box.hidden = false;
}

export function clearError() {
  $("#error").hidden = true;
}

/** Run an action, showing its error (if any) in the banner instead of losing it. */
export async function guarded(action) {
  clearError();
  try {
    return await action();
  } catch (error) {
    showError(error);
    return undefined;
  }
}

export function formValues(form) {
  return Object.fromEntries(new FormData(form).entries());
}

/** A form's since/until dates as the instants that bound those days in the browser's time zone:
 *  since = the start of its day, until = the end of its day (both days included). */
export function localPeriod(values) {
  const day = (text, offset) => {
    const [y, m, d] = text.split("-").map(Number);
    return new Date(y, m - 1, d + offset).toISOString();
  };
  const out = { ...values };
  if (values.since) out.since = day(values.since, 0);
  if (values.until) out.until = day(values.until, 1);
  return out;
}
