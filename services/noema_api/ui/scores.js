// The score explanation: what each recall voice and prior added to a result's score.

import { fmtNum, h } from "./dom.js";

export const PARTS = [
  ["semantic", "#3559c7"],
  ["lexical", "#12b76a"],
  ["graph", "#9e77ed"],
  ["temporal", "#f79009"],
  ["activation", "#0ba5ec"],
  ["importance", "#ee46bc"],
  ["credibility", "#667085"],
  ["named", "#b54708"],
  ["repo_first", "#444ce7"],
];

/** A stacked bar of what each voice and prior added to the score, then the MMR penalty (hatched),
 *  on a scale where `scale` (the best result's total) fills the bar, so weaker results look weaker. */
export function breakdown(components, scale = 1) {
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

/** One component as a person reads it: a voice's rank as "#3" ("–" where that voice did not find
 *  it), the temporal voice's raw value (the memory's time, in epoch seconds) as a time, the rest
 *  as numbers. */
export function componentValue(key, value) {
  if (typeof value !== "number") return value ?? "";
  if (key.endsWith("_rank")) return value > 0 ? `#${Math.round(value)}` : "–";
  if (key === "temporal_score" && value > 1e8) return new Date(value * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  return fmtNum(value, 4);
}

export function componentTable(components) {
  return h("table", {}, h("tbody", {},
    Object.entries(components).map(([key, value]) => h("tr", {}, h("th", {}, key), h("td", { class: "num" }, componentValue(key, value))))));
}
