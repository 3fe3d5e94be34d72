// Calls tools of an MCP server through the official TypeScript SDK client (@modelcontextprotocol/sdk),
// as a TypeScript host does: connect, list the tools (the client caches their output schemas), then
// callTool, which checks each result's structured content against the tool's output schema.
//
//   node mcp_call.mjs '<spec JSON>'
//
// spec: {"server": {"command", "args", "env", "cwd"} | {"url", "token"}, "calls": [{"name", "arguments"}]}
// Prints one JSON line: {"tools": [names], "results": [{"result": CallToolResult} | {"threw": {"code", "message"}}]}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const spec = JSON.parse(process.argv[2]);
const server = spec.server;
const transport = server.url
  ? new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: server.token ? { headers: { Authorization: `Bearer ${server.token}` } } : {},
    })
  : new StdioClientTransport({
      command: server.command,
      args: server.args ?? [],
      env: server.env,
      cwd: server.cwd,
      stderr: "inherit",
    });
const client = new Client({ name: "noema-ts-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const results = [];
for (const call of spec.calls) {
  try {
    results.push({ result: await client.callTool({ name: call.name, arguments: call.arguments ?? {} }) });
  } catch (error) {
    results.push({ threw: { code: error.code ?? null, message: String(error.message ?? error) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ tools: tools.map((t) => t.name), results }) + "\n");
