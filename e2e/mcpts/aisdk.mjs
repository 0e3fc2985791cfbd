// The AI SDK's MCP client (@ai-sdk/mcp) in the end-to-end tests (e2e/mcp_aisdk_test.go): a host
// that sends a tool call's name and arguments and nothing else, so that the only way it can give
// the gateway a key is an argument the tool list declares (docs/mcp.md#keys-from-every-client).
// It lists the tools as the AI SDK does for a model (every page), then calls one tool's execute
// once per entry of `calls`, each with those arguments, as a model's tool call would.
//
//   node aisdk.mjs '{"url":"http://127.0.0.1:8080/mcp","tool":"create_ticket",
//                    "calls":[{"title":"…","idempotency_key":"k-1"},…],"maxRetries":2}'
//
// It prints one JSON line: the input schema the AI SDK hands the model for the tool, and each
// call's outcome in the shape of call.mjs's:
//
//   {"schema":{…},"calls":[{"isError":false,"texts":[…],"structuredContent":{…},"meta":{…}|null},
//    {"error":{"code":null,"message":"…"}},…]}
//
// Exit status 1 when it cannot connect or the tool is not listed.
import { createMCPClient } from "@ai-sdk/mcp";

const cfg = JSON.parse(process.argv[2] ?? "{}");

let client;
try {
  client = await createMCPClient({ transport: { type: "http", url: cfg.url }, maxRetries: cfg.maxRetries ?? 2 });
} catch (err) {
  process.stderr.write(`connect ${cfg.url}: ${err?.message ?? err}\n`);
  process.exit(1);
}
const tools = await client.tools();
const tool = tools[cfg.tool];
if (tool === undefined) {
  process.stderr.write(`tool ${cfg.tool} is not listed: ${Object.keys(tools).join(", ")}\n`);
  process.exit(1);
}

const calls = [];
for (const [i, args] of (cfg.calls ?? []).entries()) {
  const out = {};
  try {
    const res = await tool.execute(args, { toolCallId: `call-${i}`, messages: [] });
    out.isError = res.isError === true;
    out.texts = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text);
    out.structuredContent = res.structuredContent ?? null;
    out.meta = res._meta ?? null;
  } catch (err) {
    out.error = { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
  }
  calls.push(out);
}
await client.close();
process.stdout.write(JSON.stringify({ schema: tool.inputSchema.jsonSchema, calls }) + "\n");
