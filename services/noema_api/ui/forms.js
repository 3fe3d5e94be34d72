// Forms: enter a fact or a memory as an operator (both are audited operator actions).

import { api } from "./api.js";
import { field, input, presentOnlyNotice, select, vocab, writeForm } from "./controls.js";
import { h } from "./dom.js";
import { openDetail } from "./memory.js";
import { requireWorkspace } from "./state.js";

export function addView() {
  const recordThen = (send) => async (values) => {
    await openDetail(await send(values)); // read after the write's sequence: it shows at once
  };
  const optional = (values, keys) => Object.fromEntries(keys.filter((k) => values[k]).map((k) => [k, values[k]]));
  const fact = writeForm(recordThen(async (values) => {
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
  const memory = writeForm(recordThen(async (values) => {
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
    presentOnlyNotice("add knowledge"),
    h("h2", {}, "Propose a fact"),
    h("p", { class: "meta" }, "Checked against the active facts of its domain and topic: a repeat is counted as a mention of the existing fact (raising its confidence, up to the 0.99 a stated fact starts at), a contradiction is settled by the conflict rules (see Conflicts)."),
    fact,
    h("h2", {}, "Enter a memory"),
    h("p", { class: "meta" }, "Any kind of memory, recorded as it is. Both entries are operator actions with your token's name and the reason."),
    memory,
  ];
}
