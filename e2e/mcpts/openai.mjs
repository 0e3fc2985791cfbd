// The OpenAI Agents SDK's MCP client (@openai/agents) in the end-to-end tests
// (e2e/mcp_openai_test.go). It puts what its toolMetaResolver returns in a tool call's _meta: the
// host's way to hand the gateway a key without the model (docs/mcp.md#keys-from-every-client). It
// loads the server's tools as the SDK hands them to a model, then invokes one tool once per entry
// of `calls`, with its arguments and, in _meta[metaKey], its key.
//
//   node openai.mjs '{"url":"http://127.0.0.1:8080/mcp","tool":"create_ticket",
//                     "metaKey":"io.github.idemgateway/idempotencyKey",
//                     "calls":[{"args":{"title":"…"},"key":"k-1"},…]}'
//
// It prints one JSON line: each call's output as the SDK hands it to the model (a tool error is
// text the SDK writes from the tool's own), or the error it raised.
//
//   {"calls":[{"text":"…"},{"error":"…"},…]}
import { MCPServerStreamableHttp, RunContext, getAllMcpTools, invokeFunctionTool } from "@openai/agents";

const cfg = JSON.parse(process.argv[2] ?? "{}");

let current; // the call being made, for the resolver
const server = new MCPServerStreamableHttp({
  url: cfg.url,
  name: "gateway",
  toolMetaResolver: () => ({ [cfg.metaKey]: current.key }),
});
await server.connect();
const tools = await getAllMcpTools([server]);
const tool = tools.find((t) => t.name === cfg.tool);
if (tool === undefined) {
  process.stderr.write(`tool ${cfg.tool} is not listed: ${tools.map((t) => t.name).join(", ")}\n`);
  process.exit(1);
}

const runContext = new RunContext({});
const calls = [];
for (const c of cfg.calls ?? []) {
  current = c;
  try {
    const out = await invokeFunctionTool({ tool, runContext, input: JSON.stringify(c.args) });
    calls.push({ text: typeof out === "string" ? out : JSON.stringify(out) });
  } catch (err) {
    calls.push({ error: String(err?.message ?? err) });
  }
}
await server.close();
process.stdout.write(JSON.stringify({ calls }) + "\n");
