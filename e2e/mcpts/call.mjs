// The TypeScript MCP client of the end-to-end tests (e2e/mcp_ts_test.go): the official SDK's
// Client over StreamableHTTPClientTransport, a second real client beside go-sdk. It differs from
// go-sdk where the gateway could go wrong: it numbers its JSON-RPC ids 0, 1, 2… and matches
// answers by number, and it adopts any Mcp-Session-Id header it sees (docs/contract.md §7: a
// replay never carries one).
//
//   node call.mjs '{"url":"http://127.0.0.1:8080/mcp","tool":"create_ticket","arguments":{…},
//                   "metaKey":"io.github.idemgateway/idempotencyKey","key":"k-1","times":2,
//                   "parallel":false,"timeoutMs":30000}'
//
// It connects, calls the tool `times` times (one after another, or all at once when parallel),
// each call a new request with the key in params._meta[metaKey], and prints one JSON line:
//
//   {"sessionId":"…"|null,"ids":[1,2],"calls":[{"isError":false,"texts":[…],"structuredContent":{…},
//    "meta":{…}|null,"sessionId":"…"|null},{"error":{"code":-32010,"message":"…"},"sessionId":…},…]}
//
// sessionId is the session after connecting, calls[i].sessionId the one the client had after the
// call; ids are the JSON-RPC ids of the tools/call requests as sent. Exit status 1 when it cannot
// connect.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const cfg = JSON.parse(process.argv[2] ?? "{}");

// The ids of the tools/call requests as sent, in order, read off the wire.
const sentIDs = [];
async function recordingFetch(url, init) {
  if (init?.method === "POST" && typeof init.body === "string") {
    const msg = JSON.parse(init.body);
    if (msg.method === "tools/call") sentIDs.push(msg.id);
  }
  return fetch(url, init);
}

const transport = new StreamableHTTPClientTransport(new URL(cfg.url), { fetch: recordingFetch });
const client = new Client({ name: "idemgateway-e2e-ts", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (err) {
  process.stderr.write(`connect ${cfg.url}: ${err?.message ?? err}\n`);
  process.exit(1);
}
const sessionId = transport.sessionId ?? null;

async function call() {
  const params = { name: cfg.tool, arguments: cfg.arguments ?? {} };
  if (cfg.key !== undefined) params._meta = { [cfg.metaKey]: cfg.key };
  const out = {};
  try {
    const res = await client.callTool(params, undefined, { timeout: cfg.timeoutMs ?? 30000 });
    out.isError = res.isError === true;
    out.texts = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text);
    out.structuredContent = res.structuredContent ?? null;
    out.meta = res._meta ?? null;
  } catch (err) {
    out.error = { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
  }
  out.sessionId = transport.sessionId ?? null;
  return out;
}

const times = cfg.times ?? 1;
let calls = [];
if (cfg.parallel) {
  calls = await Promise.all(Array.from({ length: times }, call));
} else {
  for (let i = 0; i < times; i++) calls.push(await call());
}
await client.close();
process.stdout.write(JSON.stringify({ sessionId, ids: sentIDs, calls }) + "\n");
