// An editor that nobody here wrote: the ACP TypeScript SDK's client drives an agent through one scenario
// and prints, as one JSON object, every message it saw (in order) and every one that does not fit the ACP v1
// schema (the SDK's own generated validators).
//
//   node acp_client.mjs WORKSPACE -- COMMAND [ARG...]
//
// The scenario: initialize; a new session; a prompt whose turn reads a file and delegates to a Task child
// that asks to write one (allowed); a prompt whose command asks to run (allowed) and is then cancelled;
// session/list with and without cwd; session/close, then session/load and session/resume of the session; a
// prompt after them; a prompt that fails. Then stdin is closed and the agent's exit is timed.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";
// The validators the SDK checks what it receives with; it does not check responses, so this client does.
import * as schema from "./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js";

const [workspace, dashes, command, ...args] = process.argv.slice(2);
if (!workspace || dashes !== "--" || !command) {
  console.error("usage: node acp_client.mjs WORKSPACE -- COMMAND [ARG...]");
  process.exit(2);
}

const RESPONSES = {
  initialize: schema.zInitializeResponse,
  "session/new": schema.zNewSessionResponse,
  "session/load": schema.zLoadSessionResponse,
  "session/resume": schema.zResumeSessionResponse,
  "session/list": schema.zListSessionsResponse,
  "session/close": schema.zCloseSessionResponse,
  "session/prompt": schema.zPromptResponse,
};
const INCOMING = {
  "session/update": schema.zSessionNotification,
  "session/request_permission": schema.zRequestPermissionRequest,
};

const seen = []; // {dir: "in" | "out", message}
const invalid = []; // {method, problem}
const methods = new Map(); // request id -> method, for the responses
const waiters = [];

function check(message) {
  let method = message.method;
  let parser = INCOMING[method];
  let value = message.params;
  if (method === undefined) {
    method = methods.get(message.id);
    if ("error" in message) {
      const error = message.error;
      const ok = error && Number.isInteger(error.code) && typeof error.message === "string";
      if (!ok) invalid.push({ method, problem: "an error without an integer code and a message" });
      return;
    }
    parser = RESPONSES[method];
    value = message.result;
  }
  if (parser === undefined) {
    invalid.push({ method, problem: "a message this client has no schema for" });
    return;
  }
  const parsed = parser.safeParse(value);
  if (!parsed.success) invalid.push({ method, problem: parsed.error.message });
}

function tap(dir) {
  return new TransformStream({
    transform(message, controller) {
      seen.push({ dir, message });
      if (dir === "out" && message.method !== undefined && message.id !== undefined) {
        methods.set(message.id, message.method);
      }
      if (dir === "in") {
        check(message);
        for (const waiter of waiters.splice(0)) {
          if (waiter.test(message)) waiter.resolve(message);
          else waiters.push(waiter);
        }
      }
      controller.enqueue(message);
    },
  });
}

function until(test) {
  const found = seen.find((s) => s.dir === "in" && test(s.message));
  if (found) return Promise.resolve(found.message);
  return new Promise((resolve) => waiters.push({ test, resolve }));
}

const update = (kind, extra = () => true) => (m) =>
  m.method === "session/update" && m.params.update.sessionUpdate === kind && extra(m.params.update);

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const wire = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const outgoing = tap("out");
outgoing.readable.pipeTo(wire.writable).catch(() => {});
const stream = { readable: wire.readable.pipeThrough(tap("in")), writable: outgoing.writable };

const answers = ["allow_once", "allow_once"];
const steps = {};

async function attempt(name, call) {
  try {
    steps[name] = { result: await call() };
  } catch (error) {
    steps[name] = { error: { code: error.code, message: error.message, data: error.data } };
  }
  return steps[name];
}

const app = acp
  .client({ name: "zero-conformance" })
  .onRequest(acp.methods.client.session.requestPermission, async () => {
    const optionId = answers.shift() ?? "reject_once";
    return { outcome: { outcome: "selected", optionId } };
  })
  .onNotification(acp.methods.client.session.update, () => {});

let closedAt = 0;
await app.connectWith(stream, async (agent) => {
  await attempt("initialize", () =>
    agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} }),
  );
  const created = await attempt("new", () =>
    agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] }),
  );
  const sessionId = created.result.sessionId;
  const prompt = (text) =>
    agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  await attempt("delegate", () => prompt("Read and delegate"));
  const running = attempt("cancelled", () => prompt("Run a long command"));
  const bash = await until(update("tool_call", (u) => u.kind === "execute"));
  await until(update("tool_call_update", (u) => u.toolCallId === bash.params.update.toolCallId && u.status === "in_progress"));
  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  await running;
  await attempt("list", () => agent.request(acp.methods.agent.session.list, { cwd: workspace }));
  await attempt("list without cwd", () => agent.request(acp.methods.agent.session.list, {}));
  await attempt("close", () => agent.request(acp.methods.agent.session.close, { sessionId }));
  await attempt("load", () => agent.request(acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] }));
  await attempt("resume", () => agent.request(acp.methods.agent.session.resume, { sessionId, cwd: workspace }));
  await attempt("after", () => prompt("And now?"));
  await attempt("failed", () => prompt("Fail"));
  closedAt = performance.now();
});
child.stdin.end();
const exit = await exited;
process.stdout.write(
  JSON.stringify({ steps, seen, invalid, exit: { ...exit, ms: performance.now() - closedAt } }) + "\n",
);
