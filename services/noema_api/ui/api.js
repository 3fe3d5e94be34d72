// The one client of the operator API (/v1/...): token, query string, errors, and read-your-writes
// (a write's Noema-Stream-Seq becomes the after_seq of every later read).

import { showError } from "./dom.js";
import { nav } from "./nav.js";
import { ApiError, state } from "./state.js";

// The reads that take as_of: memory, knowledge and audit (not dead letters or status).
const AS_OF_READS = /^\/v1\/(memories|timeline|facts|policies|conflicts|grants|domains|working-memory|notes|audit|why)(\/|$)/;

/** Call the operator API; `params` become the query string (empty values left out). */
export async function api(method, path, { params = {}, body } = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "" && value !== false) query.set(key, String(value));
  }
  if (method === "GET" && state.seenSeq > 0 && path.startsWith("/v1/") && path !== "/v1/vocabulary") query.set("after_seq", String(state.seenSeq));
  const asked = state.asOf;
  const past = method === "GET" && asked && AS_OF_READS.test(path);
  if (past) query.set("as_of", asked);
  const url = path + (query.toString() ? `?${query}` : "");
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) {
    state.token = "";
    sessionStorage.removeItem("noema.token");
    nav.signedOut();
    throw new ApiError(data.detail || data.error || "sign in with an operator token");
  }
  if (!response.ok) throw new ApiError(data.detail || data.error || `${response.status} ${response.statusText}`);
  // A read answered after the field changed again names a point no longer asked: it is not shown.
  if (past && state.asOf === asked) {
    const seq = response.headers.get("Noema-As-Of-Seq");
    document.querySelector("#as-of-shown").textContent = seq ? `as of seq ${seq} (${response.headers.get("Noema-As-Of-Time")})` : "";
  }
  const stored = Number(response.headers.get("Noema-Stream-Seq") || 0);
  if (stored > state.seenSeq) state.seenSeq = stored;
  if (response.headers.get("Noema-Caught-Up") === "false") {
    state.seenSeq = 0; // waited once in vain: later reads answer at once until the next write
    showError("The read model is behind the event stream (is the projector running?): your last change may not show yet.");
  }
  return data;
}
