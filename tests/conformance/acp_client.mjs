// An editor that nobody here wrote: the ACP TypeScript SDK's client drives an agent through one scenario
// and prints, as one JSON object, every message it saw (in order) and every one it received that does not
// fit the ACP v1 JSON Schema the SDK ships (checked with ajv: the SDK's own parsing salvages some values).
//
//   node acp_client.mjs WORKSPACE -- COMMAND [ARG...]
//
// The scenario: initialize; a new session; a prompt whose turn reads a file and delegates to a Task child
// that asks to write one (allowed); a prompt whose command asks to run (allowed) and is then cancelled;
// session/list with and without cwd; session/close, then session/load and session/resume of the session; a
// prompt after them; a prompt that fails. Then stdin is closed and the agent's exit is timed.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";

const [workspace, dashes, command, ...args] = process.argv.slice(2);
if (!workspace || dashes !== "--" || !command) {
  console.error("usage: node acp_client.mjs WORKSPACE -- COMMAND [ARG...]");
  process.exit(2);
}

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(createRequire(import.meta.url)("@agentclientprotocol/sdk/schema/v1/schema.json"), "acp");
const shape = (name) => ajv.getSchema(`acp#/$defs/${name}`);
const RESPONSES = {
  initialize: shape("InitializeResponse"),
  "session/new": shape("NewSessionResponse"),
  "session/load": shape("LoadSessionResponse"),
  "session/resume": shape("ResumeSessionResponse"),
  "session/list": shape("ListSessionsResponse"),
  "session/close": shape("CloseSessionResponse"),
  "session/prompt": shape("PromptResponse"),
};
const INCOMING = {
  "session/update": shape("SessionNotification"),
  "session/request_permission": shape("RequestPermissionRequest"),
};
const ERROR = shape("Error");

const seen = []; // {dir: "in" | "out", message}
const invalid = []; // {method, problem}
const methods = new Map(); // request id -> method, for the responses
const waiters = [];

function check(message) {
  let method = message.method;
  let validate = INCOMING[method];
  let value = message.params;
  if (method === undefined) {
    method = methods.get(message.id);
    [validate, value] = "error" in message ? [ERROR, message.error] : [RESPONSES[method], message.result];
  }
  if (validate === undefined) {
    invalid.push({ method, problem: "a message this client has no schema for" });
  } else if (!validate(value)) {
    invalid.push({ method, problem: ajv.errorsText(validate.errors) });
  }
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

let waiting = "";

function until(what, test) {
  const found = seen.find((s) => s.dir === "in" && test(s.message));
  if (found) return Promise.resolve(found.message);
  waiting = what;
  return new Promise((resolve) => waiters.push({ test, resolve }));
}

function report(extra) {
  process.stdout.write(JSON.stringify({ steps, seen, invalid, ...extra }) + "\n");
}

// A scenario that cannot go on (a message it waits for never came, or came malformed) still reports.
const watchdog = setTimeout(() => {
  report({ stuck: waiting || "a request that was never answered" });
  child.kill("SIGKILL");
  process.exit(0);
}, 20000);

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
  const bash = await until("the command's tool_call", update("tool_call", (u) => u.kind === "execute"));
  const started = (u) => u.toolCallId === bash.params.update.toolCallId && u.status === "in_progress";
  await until("the command in progress", update("tool_call_update", started));
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
clearTimeout(watchdog);
report({ exit: { ...exit, ms: performance.now() - closedAt } });
