// Extension methods and the agent's own sessions (docs/protocol.md §23)
// through @acpx-sidecar/client against the built sidecar and the fault
// agent (internal/faultagent/modes_ext.go).
import { test } from "node:test";
import assert from "node:assert/strict";

import { spawnSidecar, SidecarError } from "../dist/index.js";
import { frameChecker } from "./schema-check.mjs";
import { faultOpen, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, waitFor, workDir } from "./helpers.mjs";

test("extRequest, extNotify, onExtRequest, the extNotification event, agentSessions and agentSessionId", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const frames = frameChecker();
  const asked = [];
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir: tempDir(t),
    env: sidecarEnv(mark),
    onFrame: frames.onFrame,
    onExtRequest: (req) => {
      asked.push(req);
      if (asked.length > 1) throw { code: -32066, message: "node host refuses", data: { n: 2 } };
      return { from: "node" };
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  const notes = [];
  sc.on("extNotification", (n) => notes.push(n));
  const agentState = tempDir(t, "acpx-node-agent-");
  const modes = ["--mode", "ext-notify,ext-ask=_fa/ask,caps=list", "--state-dir", agentState];
  const open = (key, extra = {}) => {
    const p = faultOpen(key, workDir(t), mark, "normal", extra);
    p.command.args = modes;
    return sc.open(p);
  };
  // The agent's state dir must be writable under the default sandbox.
  const s = await open("node-ext", { sandbox: { filesystem: "workspace", writable: [agentState] } });
  await waitFor(() => notes.some((n) => n.method === "_fa/status" && n.session === s.id), 10000, "the agent's _fa/status");

  assert.deepEqual(await s.extRequest("_fa/echo", { v: [1, "x"] }), { echo: { v: [1, "x"] } });
  await assert.rejects(s.extRequest("_fa/fail"), (e) => e instanceof SidecarError && e.dataCode === "AGENT_ERROR" && e.data.agentError.code === -32042);
  await assert.rejects(s.extRequest("session/prompt", {}), (e) => e instanceof SidecarError && e.code === -32602 && e.data.field === "method");
  await s.extNotify("_node/hello", { ok: true });
  await waitFor(() => notes.some((n) => n.method === "_fa/seen" && n.params.method === "_node/hello"), 10000, "the agent's _fa/seen");

  let text = "";
  for (const rid of ["t1", "t2"]) {
    const turn = s.prompt({ requestId: rid, prompt: "go", _meta: { trace: rid } });
    for await (const u of turn.updates) text += (u.update.content?.text ?? "") + "\n";
    assert.equal((await turn.result).status, "completed");
  }
  assert.match(text, /ext: result \{"from":"node"\}/);
  assert.match(text, /ext: error -32066 node host refuses \{"n":2\}/);
  assert.equal(asked[0].method, "_fa/ask");
  assert.equal(asked[0].requestId, "t1");
  assert.equal(asked[0].session, s.id);

  const page = await s.agentSessions();
  assert.equal(page.sessions.length, 1);
  assert.equal(page.sessions[0].sessionId, s.identity.backendSessionId);
  const s2 = await open("node-ext-2", { agentSessionId: s.identity.backendSessionId, sandbox: { filesystem: "workspace", writable: [agentState] } });
  assert.equal(s2.opened.resumed, true);
  assert.equal(s2.identity.backendSessionId, s.identity.backendSessionId);
  assert.deepEqual(s2.opened.authMethods, []);

  await sc.shutdown();
  assert.equal(sc.exitCode, 0);
  assert.deepEqual(markedPids(mark), []);
  // The one frame outside the schema is the refused non-`_` extRequest this test sent.
  const refused = (e) => e.startsWith("session/extRequest params") && e.includes('"method":"session/prompt"');
  assert.equal(frames.errors.filter(refused).length, 1);
  assert.deepEqual(frames.errors.filter((e) => !refused(e)), [], "every other frame both ways fits docs/protocol.schema.json");
});

test("onExtRequest: the signal aborts on the agent's withdrawal, and an answer after the sidecar exited does not crash the host", { skip: skipReason }, async (t) => {
  const mark = newMark();
  let aborted;
  let asked2 = false;
  let gotRequest;
  const asked = new Promise((r) => (gotRequest = r));
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir: tempDir(t),
    env: sidecarEnv(mark),
    onExtRequest: (req, { signal }) => {
      if (req.requestId === "t2") {
        asked2 = true;
        // Answers after the sidecar is gone (shut down below): dropped,
        // never a crash (ERR_STREAM_DESTROYED had killed the host).
        return new Promise((resolve) => setTimeout(() => resolve({ late: true }), 800));
      }
      gotRequest();
      return new Promise((resolve) => {
        signal.addEventListener("abort", () => {
          aborted = true;
          resolve({ late: true }); // ignored: the agent withdrew it
        });
      });
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  const p = faultOpen("node-ext-withdraw", workDir(t), mark, "normal", {});
  p.command.args = ["--mode", "ext-ask=_fa/ask,ext-withdraw=200"];
  const s = await sc.open(p);
  const turn = s.prompt({ requestId: "t1", prompt: "ask" });
  for await (const _ of turn.updates) {
    // drained
  }
  await turn.result;
  await asked;
  assert.equal(aborted, true, "the handler's signal did not abort on the agent's $/cancel_request");
  // A second turn's request is answered only after the sidecar exited.
  const t2 = s.prompt({ requestId: "t2", prompt: "ask" });
  t2.result.catch(() => undefined);
  await waitFor(() => asked2, 10000, "the second turn's extension request");
  await sc.shutdown();
  await new Promise((r) => setTimeout(r, 1200)); // the late answer's write happens now
  assert.deepEqual(markedPids(mark), []);
});
