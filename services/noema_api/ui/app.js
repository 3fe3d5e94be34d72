// Noema memory explorer: a page over the operator API (/v1/...), nothing else. Every figure it shows
// comes from the API the agents' tools share, so its ranking is the agents' ranking. Data is put in
// the page with textContent only (never parsed as HTML): memory contents are untrusted input.
//
// The shell: tabs, sign-in and the workspace; each tab's view is its own module.

import { api } from "./api.js";
import { auditView } from "./audit.js";
import { conflictsView } from "./conflicts.js";
import { syncPresentOnly } from "./controls.js";
import { $, clearError, fill, guarded, showError } from "./dom.js";
import { factsView } from "./facts.js";
import { addView } from "./forms.js";
import { grantsView } from "./grants.js";
import { graphView } from "./graph.js";
import { openDetail } from "./memory.js";
import { nav } from "./nav.js";
import { policiesView } from "./policies.js";
import { searchView } from "./search.js";
import { state } from "./state.js";
import { timelineView } from "./timeline.js";
import { whyView } from "./why.js";

const VIEWS = {
  search: searchView,
  timeline: timelineView,
  facts: factsView,
  policies: policiesView,
  conflicts: conflictsView,
  grants: grantsView,
  graph: graphView,
  audit: auditView,
  why: whyView,
  add: addView,
};

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
  fill($("#view"), ...VIEWS[tab]());
  syncPresentOnly();
}

function closeDetail() {
  $("#detail").hidden = true;
  state.detailId = "";
  fill($("#detail"));
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
    closeDetail(); // another workspace's memory must not stay open beside this one's results
    // A search shown is run again in the new workspace; the knowledge entry form being filled in
    // is left alone; every other view (listings, an empty search, why, the graph) starts afresh.
    const form = document.querySelector("#view form");
    if (state.tab === "search" && form && form.checkValidity()) form.requestSubmit();
    else if (state.tab !== "add") switchTab(state.tab);
  });
  const asOf = $("#as-of");
  asOf.addEventListener("change", () => {
    state.asOf = asOf.value.trim();
    if (!state.asOf) $("#as-of-shown").textContent = "";
    syncPresentOnly(); // the write forms shown: off while a past point is read, on again for now
    refreshListing(); // the search or listing shown, again as of the new point
    if (!$("#detail").hidden && state.detailId) openDetail(state.detailId); // and the memory open
  });
  $("#scope").addEventListener("submit", (event) => event.preventDefault());
  $("#signin").addEventListener("click", () => {
    if (state.token) {
      state.token = "";
      sessionStorage.removeItem("noema.token");
      updateSignin();
      closeDetail();
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

nav.switchTab = switchTab;
nav.refreshListing = refreshListing;
nav.signedOut = () => {
  updateSignin();
  askToken();
};
start().catch(showError);
