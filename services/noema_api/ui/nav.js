// What the views and the API client ask of the shell (switch tab, refresh the listing, ask for a
// token). The shell fills these in at start; views call them through here, so no module imports the
// shell (which imports every view).

export const nav = {
  switchTab: (tab) => {},
  refreshListing: () => {},
  signedOut: () => {},
};
