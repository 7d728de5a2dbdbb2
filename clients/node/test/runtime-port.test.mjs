// openAcpxRuntimePort driven the way the seed's host drives its runtime
// port: identity, status, a verified model selection, a turn's events then
// its result, and a close that keeps the session's state (a reopen of the
// same key resumes it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { openAcpxRuntimePort, selectKind } from "../dist/index.js";
import { frameChecker } from "./schema-check.mjs";
import { alive, faultBin, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir } from "./helpers.mjs";

const frames = frameChecker();

// portOptions puts the sidecar's state in root/state and the agent's cwd
// (with the fault agent's own state) in root/work: the sidecar's default
// sandbox never lets an agent write a state dir (docs/protocol.md §19).
function portOptions(root, mark, extra = {}) {
  mkdirSync(join(root, "work", "fa"), { recursive: true });
  return {
    spawn: { binary: sidecarBin, stateDir: join(root, "state"), env: sidecarEnv(mark), onFrame: frames.onFrame },
    agent: "generic",
    // The fault agent keeps its sessions in --state-dir, so a new process
    // can load one (resume).
    command: { path: faultBin, args: ["--mode", "permission=execute", "--state-dir", join(root, "work", "fa")] },
    cwd: join(root, "work"),
    providerSessionKey: "provider-key",
    permissionMode: "approve-reads",
    launchEnvironment: { ACPX_TEST_MARK: mark, OMITTED: undefined },
    systemInstructions: "Use the host's tools.",
    ...extra,
  };
}

test("the runtime port: identity, status, setModel verified, events then result, state-preserving close", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const port = await openAcpxRuntimePort(portOptions(stateDir, mark));
  t.after(() => port.close({ reason: "test cleanup" }).catch(() => undefined));

  const id = await port.identity();
  assert.deepEqual(Object.keys(id).sort(), ["acpxRecordId", "agentSessionId", "backendSessionId"]);
  assert.equal(id.acpxRecordId, "provider-key");
  assert.match(id.backendSessionId, /^fa-/);
  id.acpxRecordId = "mutated";
  assert.equal((await port.identity()).acpxRecordId, "provider-key", "identity() hands out a copy");

  const before = await port.getStatus();
  assert.deepEqual(before.models, { currentModelId: "fa-model", availableModelIds: ["fa-model", "fa-large"] });
  assert.equal(before.backendSessionId, id.backendSessionId);
  assert.equal(before.lastRequestId, undefined);

  await port.setModel("fa-large");
  assert.equal((await port.getStatus()).models.currentModelId, "fa-large", "the selection is verified and persisted");
  await assert.rejects(port.setModel("not-offered"), { dataCode: "MODEL_UNAVAILABLE" });

  const asked = [];
  const turn = port.startTurn({
    text: "hello",
    requestId: "req-1",
    onPermissionRequest: (req) => {
      asked.push(req.kind);
      return selectKind(req, "reject_once");
    },
  });
  assert.equal(turn.requestId, "req-1");
  await turn.promptStarted;
  const events = [];
  for await (const ev of turn.events) events.push(ev);
  const result = await turn.result;
  assert.ok(events.length > 0);
  const text = events.filter((e) => e.type === "text_delta").map((e) => e.text).join("");
  assert.match(text, /hello from faultagent/);
  assert.match(text, /permission: selected reject-once/, "the turn's handler answered");
  assert.deepEqual(asked, ["execute"]);
  assert.ok(events.some((e) => e.type === "status" && e.tag === "usage_update"));
  assert.equal(result.status, "completed");
  assert.equal(result.stopReason, "end_turn");

  const after = await port.getStatus();
  assert.equal(after.lastRequestId, "req-1");
  assert.ok(after.usage.perRequest["req-1"], "per-request usage from the record");

  const pid = port.session.opened.process.pid;
  const proof = await port.close({ reason: "test complete" });
  assert.equal(proof.complete, true);
  assert.equal(proof.reason, "test complete");
  assert.equal(alive(pid), false);
  assert.deepEqual(await port.close({ reason: "again" }), proof, "close is idempotent");
  const record = JSON.parse(readFileSync(join(stateDir, "state", "sessions", "provider-key.json"), "utf8"));
  assert.equal(record.closed, true, "the record is kept, marked closed");

  // State preserved: the same key resumes the same ACP session.
  const again = await openAcpxRuntimePort(portOptions(stateDir, mark));
  assert.equal(again.session.opened.resumed, true);
  assert.equal((await again.identity()).backendSessionId, id.backendSessionId);
  assert.equal((await again.getStatus()).lastRequestId, "req-1");
  assert.equal((await again.close({ reason: "done", discardPersistentState: true })).complete, true);
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, [], "every frame fits docs/protocol.schema.json");
});

test("the runtime port: a turn whose provider died is a failed result, later turns are refused", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const port = await openAcpxRuntimePort(
    portOptions(stateDir, mark, { command: { path: faultBin, args: ["--mode", "crash-mid-turn"] }, providerSessionKey: "crash" }),
  );
  t.after(() => port.close({ reason: "test cleanup" }).catch(() => undefined));
  const turn = port.startTurn({ text: "x", requestId: "c1" });
  for await (const _ of turn.events) {
    // drain
  }
  const result = await turn.result;
  assert.equal(result.status, "failed");
  assert.equal(result.error.code, "PROVIDER_PROCESS_LOST");
  await assert.rejects(port.startTurn({ text: "y", requestId: "c2" }).result, { dataCode: "PROVIDER_PROCESS_LOST" });
  const proof = await port.close({ reason: "after crash" });
  assert.equal(proof.complete, true);
  assert.deepEqual(markedPids(mark), []);
});

test("the runtime port: closeStream ends the events of a running turn; cancel ends the turn", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const port = await openAcpxRuntimePort(
    portOptions(stateDir, mark, { command: { path: faultBin, args: ["--mode", "slow-turn=60000"] }, providerSessionKey: "slow" }),
  );
  t.after(() => port.close({ reason: "test cleanup" }).catch(() => undefined));
  const turn = port.startTurn({ text: "wait", requestId: "s1" });
  const drained = (async () => {
    let n = 0;
    for await (const _ of turn.events) n++;
    return n;
  })();
  await turn.closeStream();
  await drained; // finishes although the turn still runs
  assert.equal((await port.getStatus()).details.state, "turn");
  await turn.cancel();
  assert.equal((await turn.result).status, "cancelled");
  assert.equal((await port.close({ reason: "done" })).complete, true);
  assert.deepEqual(markedPids(mark), []);
});

test("the runtime port: promptStarted rejects a refused turn, a queued turn is accepted, a closed own port is SESSION_CLOSING", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const port = await openAcpxRuntimePort(
    portOptions(stateDir, mark, { command: { path: faultBin, args: ["--mode", "slow-turn=60000"] }, providerSessionKey: "refuse" }),
  );
  t.after(() => port.close({ reason: "test cleanup" }).catch(() => undefined));
  const first = port.startTurn({ text: "wait", requestId: "r1" });
  await first.promptStarted; // accepted: it runs

  // A second turn without queue is refused TURN_ACTIVE: promptStarted and
  // result reject with it, its events end empty.
  const refused = port.startTurn({ text: "again", requestId: "r2" });
  await assert.rejects(refused.promptStarted, { code: -32000, dataCode: "TURN_ACTIVE" });
  await assert.rejects(refused.result, { dataCode: "TURN_ACTIVE" });
  for await (const _ of refused.events) assert.fail("a refused turn has no events");

  // queue: true waits behind r1; promptStarted resolves while r1 runs.
  const queued = port.startTurn({ text: "later", requestId: "r3", queue: true });
  await queued.promptStarted;
  const st = await port.getStatus();
  assert.equal(st.details.state, "turn");
  assert.deepEqual(st.details.queuedRequestIds, ["r3"]);
  await queued.cancel(); // a queued turn cancelled before it started
  assert.equal((await queued.result).status, "cancelled");
  await first.cancel();
  assert.equal((await first.result).status, "cancelled");

  const proof = await port.close({ reason: "done" });
  assert.equal(proof.complete, true);
  // The port's own sidecar is gone: a clear SESSION_CLOSING, not TRANSPORT.
  await assert.rejects(port.getStatus(), { code: -32000, dataCode: "SESSION_CLOSING" });
  await assert.rejects(port.setModel("fa-large"), { dataCode: "SESSION_CLOSING" });
  const late = port.startTurn({ text: "late", requestId: "r4" });
  await assert.rejects(late.promptStarted, { dataCode: "SESSION_CLOSING" });
  await assert.rejects(late.result, { dataCode: "SESSION_CLOSING" });
  assert.deepEqual(await port.close({ reason: "again" }), proof);
  assert.deepEqual(markedPids(mark), []);
});

test("the runtime port: sandbox, limits and lifecycle reach session/open; an unknown option is refused before anything starts", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  await assert.rejects(openAcpxRuntimePort({ ...portOptions(stateDir, mark), sandbx: { network: "none" } }), {
    code: -32602,
    dataCode: "INVALID_PARAMS",
    data: { code: "INVALID_PARAMS", retryable: false, field: "sandbx" },
  });
  const port = await openAcpxRuntimePort(
    portOptions(stateDir, mark, {
      sandbox: { network: { allow: ["127.0.0.1:9"] } },
      limits: { connections: 3 },
      lifecycle: "per-turn",
    }),
  );
  t.after(() => port.close({ reason: "test cleanup" }).catch(() => undefined));
  assert.deepEqual(port.session.opened.sandbox.network, { allow: ["127.0.0.1:9"] });
  assert.equal(port.session.opened.lifecycle, "per-turn");
  assert.equal((await port.close({ reason: "done" })).complete, true);
  assert.deepEqual(markedPids(mark), []);
});
