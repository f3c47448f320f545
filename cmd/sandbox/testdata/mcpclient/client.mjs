// The TypeScript SDK's MCP client driving "sandbox mcp --live", for
// TestMCPTypeScriptClient: it lists the tools, calls each of them, and
// prints one JSON object on stdout with what it saw, which the Go test
// checks. Usage:
//
//	node client.mjs stdio SANDBOX-BINARY [FLAG...]
//	[MCP_BEARER=TOKEN] node client.mjs http URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, ...flags] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: ["mcp", ...flags], stderr: "inherit" });
} else if (mode === "http") {
  // MCP_BEARER, when set, is sent as a bearer token with every request.
  const headers = process.env.MCP_BEARER ? { Authorization: `Bearer ${process.env.MCP_BEARER}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error("usage: node client.mjs stdio SANDBOX-BINARY [FLAG...] | http URL");
  process.exit(2);
}

const client = new Client({ name: "sandbox-ts-test", version: "1.0.0" });
await client.connect(transport);

const out = { tools: [], calls: [] };
const listed = await client.listTools();
out.tools = listed.tools.map((t) => t.name).sort();

// call records one tool call: the SDK checks structured content against
// the tool's output schema, so a result that does not match it throws.
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  const rec = { tool: name, isError: res.isError === true, text, structured: res.structuredContent ?? null };
  out.calls.push(rec);
  return rec;
}

await call("write_file", { path: "notes/a.txt", content: "from typescript\n" });
await call("read_file", { path: "notes/a.txt" });
await call("list_files", { path: "notes" });
await call("run", { argv: ["cat", "notes/a.txt"] });
await call("run", { shell: "echo bad >&2; exit 7" });
await call("run_code", { language: "python", code: "print(sum(range(10)))" });
await call("snapshot", { name: "ts" });
await call("delete_file", { path: "notes/a.txt" });
await call("restore", { snapshot: "ts" });
await call("read_file", { path: "notes/a.txt" });
await call("reset", {});
await call("list_files", {});
const started = await call("start_process", { argv: ["sleep", "3611"] });
await call("list_processes", {});
await call("signal_process", { pid: started.structured.pid, signal: "KILL" });
// The signalled process leaves the process list, and its background
// entry says it ended, once it is reaped.
let listed2;
for (let i = 0; i < 100; i++) {
  listed2 = await client.callTool({ name: "list_processes", arguments: {} });
  const pid = started.structured.pid;
  if (!listed2.structuredContent.processes.some((p) => p.pid === pid) &&
      listed2.structuredContent.background.some((b) => b.pid === pid && !b.running)) break;
  await new Promise((r) => setTimeout(r, 50));
}
out.calls.push({ tool: "list_processes", isError: listed2.isError === true, text: "", structured: listed2.structuredContent });

if (mode === "http") {
  // Ends the session on the server (an HTTP DELETE), and its sandbox.
  await transport.terminateSession();
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
