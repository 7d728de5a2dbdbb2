// Per-turn sessions and the state store through the Node client
// (docs/protocol.md §24), against the built sidecar and the fault agent
// (mode recall: each turn first says "recall: N earlier prompts: …";
// --state-dir persists its sessions so a new process can load them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

import { spawnSidecar, SidecarError, textOf } from "../dist/index.js";
import { LifecycleWatch } from "../dist/lifecycle.js";
import { frameChecker } from "./schema-check.mjs";
import { alive, faultBin, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, workDir } from "./helpers.mjs";

/** perTurnOpen: open params of a per-turn fault-agent session whose agent keeps its sessions in dir. */
function perTurnOpen(key, cwd, dir, mark, extra = {}) {
  return {
    sessionKey: key,
    agent: "generic",
    command: { path: faultBin, args: ["--mode", "recall", "--state-dir", dir] },
    cwd,
    env: { ACPX_TEST_MARK: mark },
    permissionMode: "approve-reads",
    nonInteractivePermissions: "deny",
    lifecycle: "per-turn",
    ...extra,
  };
}

/** agentDir makes the agent's state dir inside the workspace (writable under the default sandbox). */
function agentDir(cwd, name) {
  const d = join(cwd, name);
  mkdirSync(d, { mode: 0o700 });
  return d;
}

/** runTurn runs one turn and returns its text. */
async function runTurn(s, requestId, prompt) {
  const turn = s.prompt({ requestId, prompt });
  let text = "";
  for await (const u of turn.updates) text += (textOf(u) ?? "") + "\n";
  const res = await turn.result;
  assert.equal(res.status, "completed", JSON.stringify(res));
  return text;
}

/** within fails after ms instead of letting a promise that never settles hang the test. */
function within(p, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

test("a per-turn session: two turns, parked → reviving → live → parked, the revived agent remembers", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const frames = frameChecker();
  const sc = await spawnSidecar({ binary: sidecarBin, stateDir: tempDir(t), env: sidecarEnv(mark), onFrame: frames.onFrame });
  t.after(() => sc.kill("SIGKILL"));
  const events = [];
  const retires = [];
  sc.on("lifecycle", (n) => events.push(n));
  sc.on("proof", (p) => p.origin === "retire" && retires.push(p));
  sc.on("exited", (e) => assert.fail(`unexpected session/exited ${JSON.stringify(e)}`));

  const cwd = workDir(t);
  const s = await sc.open(perTurnOpen("node-per-turn", cwd, agentDir(cwd, ".agent"), mark, { reviveWaitMs: 30000 }));
  assert.equal(s.opened.lifecycle, "per-turn");
  assert.equal(s.opened.restore, undefined);
  assert.equal(s.lifecycle, undefined, "no notice before the first retire");

  await runTurn(s, "t1", "the first prompt");
  const first = await within(s.waitLifecycle("parked"), 30_000, "the first retire");
  assert.equal(first.session, s.id);
  assert.equal(first.sessionKey, "node-per-turn");
  assert.equal(first.proof?.origin, "retire");
  assert.equal(first.proof?.complete, true);
  assert.ok(first.proof.processes.length > 0, "the retire proof lists the tree");
  // (The sidecar and its guardian carry the mark too: check the tree's own.)
  assert.ok(first.proof.processes.every((p) => !alive(p.pid)), "every process of the retired tree is gone");
  const st = await s.status();
  assert.equal(st.state, "parked");
  assert.deepEqual(
    { mode: st.lifecycle?.mode, state: st.lifecycle?.state, retires: st.lifecycle?.retires, revives: st.lifecycle?.revives },
    { mode: "per-turn", state: "parked", retires: 1, revives: 0 },
  );
  const stats = await sc.stats();
  assert.equal(stats.sessions.parked, 1);
  assert.equal(stats.liveTrees?.live, 0);

  const text = await runTurn(s, "t2", "the second prompt");
  assert.match(text, /recall: 1 earlier prompts: the first prompt/, "the revived agent remembers the first turn");
  assert.equal(s.lifecycle?.state, "live", "reviving and live came before the revived turn's result");
  assert.equal((await s.waitLifecycle("live")).state, "live", "the latest state resolves at once");
  const second = await within(s.waitLifecycle("parked"), 30_000, "the second retire");
  assert.notEqual(second.proof.processes[0].pid, first.proof.processes[0].pid, "the revive launched a new provider");
  assert.ok(second.proof.processes.every((p) => !alive(p.pid)), "every process of the retired tree is gone");

  assert.deepEqual(
    events.map((n) => n.state),
    ["parked", "reviving", "live", "parked"],
  );
  assert.ok(events.every((n) => n.session === s.id));
  assert.equal(retires.length, 2, "each retire proof also came as a proof event");
  const st2 = await s.status();
  assert.equal(st2.lifecycle?.retires, 2);
  assert.equal(st2.lifecycle?.revives, 1);
  assert.equal(typeof st2.lifecycle?.lastReviveMs, "number");

  // A wait in progress ends with the close; one after it rejects at once.
  const pending = s.waitLifecycle("live");
  const proof = await s.close({ reason: "done" });
  assert.equal(proof.complete, true);
  assert.deepEqual(proof.processes, [], "a parked session's close ends nothing");
  await assert.rejects(pending, (err) => err instanceof SidecarError && err.code === 0 && err.dataCode === "SESSION_ENDED");
  await assert.rejects(s.waitLifecycle("parked"), { dataCode: "SESSION_ENDED" });
  assert.equal(s.lifecycle, undefined);

  assert.deepEqual(await sc.shutdown(), []);
  assert.equal(sc.exitCode, 0);
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, [], "every frame both ways fits docs/protocol.schema.json");
});

test("a file:// state store: the retire publishes, the close of the parked session has nothing new; another sidecar restores and the agent remembers", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const keyFile = join(tempDir(t), "state.key");
  writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
  const args = ["--state-store", "file://" + tempDir(t), "--state-key-file", keyFile];
  const cwd = workDir(t);

  const frames = frameChecker();
  const a = await spawnSidecar({ binary: sidecarBin, stateDir: tempDir(t), env: sidecarEnv(mark), args, onFrame: frames.onFrame });
  t.after(() => a.kill("SIGKILL"));
  assert.equal(a.info.capabilities.stateStore?.kind, "file");
  assert.match(a.info.capabilities.stateStore?.keyId ?? "", /^[0-9a-f]{16}$/);
  const dirA = agentDir(cwd, ".agent-a");
  const s = await a.open(perTurnOpen("node-portable", cwd, dirA, mark, { stateDirs: { agent: dirA } }));
  await runTurn(s, "t1", "alpha");
  const retire = (await within(s.waitLifecycle("parked"), 30_000, "the retire")).proof?.publication;
  assert.equal(retire?.state, "published", JSON.stringify(retire));
  const st = await s.status();
  assert.equal(st.store?.generation, retire.generation);
  assert.ok(st.store?.owner.sidecarId);
  const proof = await s.close();
  assert.equal(proof.complete, true);
  // No tree ran since the retire published: nothing new to publish.
  assert.equal(proof.publication?.state, "skipped", JSON.stringify(proof.publication));
  assert.equal(proof.publication.error, undefined);
  assert.match(retire.sha256 ?? "", /^[0-9a-f]{64}$/);
  await a.shutdown();
  assert.deepEqual(frames.errors, []);
  rmSync(dirA, { recursive: true, force: true });

  const b = await spawnSidecar({ binary: sidecarBin, stateDir: tempDir(t), env: sidecarEnv(mark), args, onFrame: frames.onFrame });
  t.after(() => b.kill("SIGKILL"));
  const dirB = agentDir(cwd, ".agent-b");
  const s2 = await b.open(perTurnOpen("node-portable", cwd, dirB, mark, { stateDirs: { agent: dirB } }));
  assert.equal(s2.opened.restore?.generation, retire.generation, "the open restored the retire's archive");
  assert.match(await runTurn(s2, "t2", "beta"), /recall: 1 earlier prompts: alpha/, "the agent on B remembers A's turn");
  await b.shutdown();
  assert.equal(b.exitCode, 0);
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, [], "every frame both ways fits docs/protocol.schema.json");
});

test("LifecycleWatch: latest state at once, a later one, other sessions and states ignored, end, abort, exit", async () => {
  const w = new LifecycleWatch();
  const n = (session, state) => ({ session, sessionKey: "k", state });
  const parked = w.wait("s-1", "parked");
  w.notice(n("s-2", "parked"));
  w.notice(n("s-1", "reviving"));
  w.notice(n("s-1", "parked"));
  assert.equal((await parked).state, "parked");
  assert.equal((await w.wait("s-1", "parked")).session, "s-1", "the latest state resolves at once");
  assert.equal(w.latest("s-1").state, "parked");

  const live = w.wait("s-1", "live");
  w.end("s-1");
  await assert.rejects(live, { code: 0, dataCode: "SESSION_ENDED" });
  assert.equal(w.latest("s-1"), undefined);
  assert.equal(w.latest("s-2").state, "parked", "another session's notice is kept");

  const ac = new AbortController();
  const aborted = w.wait("s-3", "parked", ac.signal);
  ac.abort(new Error("host gave up"));
  await assert.rejects(aborted, (err) => err.dataCode === "CANCELLED" && err.cause.message === "host gave up");

  const all = w.wait("s-2", "live");
  w.end("");
  await assert.rejects(all, { dataCode: "SESSION_ENDED" });
  const gone = w.wait("s-4", "parked");
  w.exit("the sidecar exited");
  await assert.rejects(gone, { dataCode: "TRANSPORT" });
  await assert.rejects(w.wait("s-5", "parked"), { dataCode: "TRANSPORT" });
});

test("LifecycleWatch: an ended notice settles every other wait SESSION_ENDED, now and later; a wait for ended resolves", async () => {
  const w = new LifecycleWatch();
  const n = (session, state) => ({ session, sessionKey: "k", state });
  w.notice(n("s-1", "parked"));
  const parked = w.wait("s-1", "live");
  const ended = w.wait("s-1", "ended");
  w.notice(n("s-1", "ended"));
  await assert.rejects(parked, { dataCode: "SESSION_ENDED" });
  assert.equal((await ended).state, "ended");
  // A session that ended on its own (a lost revive): no later state comes,
  // so a wait begun afterwards fails at once instead of hanging (found by a
  // fresh-user trial).
  await assert.rejects(w.wait("s-1", "parked"), { dataCode: "SESSION_ENDED" });
  assert.equal(w.latest("s-1").state, "ended");
});
