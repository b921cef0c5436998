// Drives `zero mcp serve` with the MCP TypeScript SDK's client, which checks every answer against the
// protocol's schema: initialize, list the tools, call a specialist with progress, call run_team, cancel a
// call (notifications/cancelled) and read the cancelled session's status, then close.
//
// node mcp_client.mjs '{"command": "zero", "args": [...], "env": {...}}'
// prints one JSON object: what the server said at each step.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const { command, args, env } = JSON.parse(process.argv[2]);
const report = {};
let stderr = "";

// Like a host, the client starts the server with a minimal environment (the SDK's default one) and what
// the server's configuration adds.
const transport = new StdioClientTransport({ command, args, env, stderr: "pipe" });
transport.stderr.on("data", (chunk) => (stderr += chunk));
const client = new Client({ name: "zero-conformance", version: "1.0.0" });

// Progress notifications, each checked against the schema, as they arrive. They are read here rather
// than through a call's onprogress: the SDK hands a notification to onprogress a tick later than the
// answer that follows it in the same read, and drops it once the call has its answer
// (modelcontextprotocol/typescript-sdk#2580, a race no server can avoid). The calls still pass an
// onprogress, which is what makes the SDK ask for progress.
const progress = [];
let onProgress = () => {};
client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
  progress.push(notification.params);
  onProgress(notification.params);
});
const askProgress = { onprogress: () => {} };

async function run() {
  await client.connect(transport);
  report.serverVersion = client.getServerVersion();
  report.capabilities = client.getServerCapabilities();
  report.instructions = client.getInstructions();
  report.tools = (await client.listTools()).tools;

  report.answer = await client.callTool(
    { name: "explorer", arguments: { prompt: "Look around" } },
    undefined,
    askProgress,
  );
  report.progress = progress.splice(0);

  report.team = await client.callTool({ name: "run_team", arguments: { team: "team.toml" } }, undefined, askProgress);
  report.teamProgress = progress.splice(0);

  // A call the client gives up on: it aborts once the run has made a tool call, which sends
  // notifications/cancelled; the server stops the run and its session (named by the first progress
  // notification) ends cancelled.
  const controller = new AbortController();
  let sessionId = null;
  onProgress = (p) => {
    const named = /^session (\S+)$/.exec(p.message ?? "");
    if (named) sessionId = named[1];
    else controller.abort("the user stopped it");
  };
  const call = client.callTool({ name: "explorer", arguments: { prompt: "Take forever" } }, undefined, {
    ...askProgress,
    signal: controller.signal,
  });
  report.cancelledCall = await call.then(
    (result) => ({ answered: result }),
    (error) => ({ rejected: String(error) }),
  );
  report.cancelledSession = sessionId;
  const deadline = Date.now() + 20_000;
  for (report.polls = 1; ; report.polls++) {
    const tree = await client.callTool({ name: "session_tree", arguments: { session_id: sessionId } });
    report.cancelledStatus = JSON.parse(tree.content[0].text).status;
    if (report.cancelledStatus !== "running" || Date.now() > deadline) break;
  }
  await client.close();
}

try {
  await run();
} catch (error) {
  report.error = String(error?.stack ?? error);
  await client.close().catch(() => {});
}
report.stderr = stderr;
process.stdout.write(JSON.stringify(report) + "\n");
