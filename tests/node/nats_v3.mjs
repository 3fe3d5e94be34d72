// docs/sdk.md's Node.js example, run by tests/integration/test_node_clients.py: nats.js v3
// (@nats-io/transport-node + @nats-io/jetstream) connects with the fields of noema.json — nats_url
// (no credentials in it: nats.js refuses them there), nats_user, nats_password — and calls the
// agent service.
//
//   node nats_v3.mjs <path of noema.json> <subject of an agent operation> '<request JSON>'
//
// Prints one JSON line: {"reply": <the service's reply>, "stats": <$SRV.STATS.noema reply>}.
import { readFileSync } from "node:fs";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";

const [statePath, subject, body] = process.argv.slice(2);
const state = JSON.parse(readFileSync(statePath, "utf8"));
const nc = await connect({
  servers: state.nats_url.split(","),
  user: state.nats_user,
  pass: state.nats_password,
});
const reply = await nc.request(subject, body, { timeout: 10000 });
const stats = await nc.request("$SRV.STATS.noema", "", { timeout: 10000 });
jetstream(nc); // the JetStream client an observation is published with (no I/O until used)
await nc.close();
process.stdout.write(JSON.stringify({ reply: reply.json(), stats: stats.json() }) + "\n");
