// LangChain's MCP adapters (@langchain/mcp-adapters) in the end-to-end tests
// (e2e/mcp_langchain_test.go). LangChain checks a call's arguments against the tool's listed input
// schema before it sends them, so a key argument the listing did not declare would be refused in
// the client; and it sets per-call headers only from a beforeToolCall hook (which opens a new
// connection for them). It loads the server's tools as LangChain tools, then invokes one tool once
// per entry of `calls`, each with its arguments and, when `header` is set, its key in that header.
//
//   node langchain.mjs '{"url":"http://127.0.0.1:8080/mcp","tool":"create_ticket",
//                       "calls":[{"args":{"title":"…","idempotency_key":"k-1"}},
//                                {"args":{"title":"…"},"header":"Idempotency-Key","key":"k-2"}]}'
//
// It prints one JSON line: the tool's input schema as LangChain checks it, and each call's outcome:
// its text, or the error LangChain raised (a tool error is a ToolException with the tool's text).
//
//   {"schema":{…},"calls":[{"text":"…"},{"error":"…"},…]}
import { MultiServerMCPClient } from "@langchain/mcp-adapters";

const cfg = JSON.parse(process.argv[2] ?? "{}");

let current; // the call being made, for the hook
const client = new MultiServerMCPClient({
  mcpServers: { gateway: { transport: "http", url: cfg.url } },
  beforeToolCall: () => (current?.header ? { headers: { [current.header]: current.key } } : {}),
});
const tools = await client.getTools();
const tool = tools.find((t) => t.name === cfg.tool);
if (tool === undefined) {
  process.stderr.write(`tool ${cfg.tool} is not listed: ${tools.map((t) => t.name).join(", ")}\n`);
  process.exit(1);
}

const calls = [];
for (const c of cfg.calls ?? []) {
  current = c;
  try {
    const res = await tool.invoke(c.args);
    calls.push({ text: typeof res === "string" ? res : JSON.stringify(res) });
  } catch (err) {
    calls.push({ error: String(err?.message ?? err) });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ schema: tool.schema, calls }) + "\n");
