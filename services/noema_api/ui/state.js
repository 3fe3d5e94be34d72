// What the tab holds: the token (this tab only), the workspace (remembered), where the operator is,
// the newest stream sequence its writes stored, and the vocabulary the API serves.

export const state = {
  token: sessionStorage.getItem("noema.token") || "",
  workspace: localStorage.getItem("noema.workspace") || "",
  tab: "search",
  graphRoot: "",
  whyId: "",
  // The newest event-stream sequence this tab's writes stored: every read asks the API to wait
  // until the read model has applied it (after_seq), so a change shows at once, without sleeps.
  seenSeq: 0,
  // A past point every read of memory and knowledge is asked as of (as_of): a stream sequence or a
  // time with its zone; empty for now. The API says which sequence and time it answered for.
  asOf: "",
  // The memory whose detail is open (it follows the as of field), "" when none.
  detailId: "",
  vocabulary: null,
};

/** An error to show the operator as it is (the API's message, or what to fix). */
export class ApiError extends Error {}

export function requireWorkspace() {
  if (!state.workspace) throw new ApiError("enter a workspace first");
  return state.workspace;
}
