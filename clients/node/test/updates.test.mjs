// Turn updates through the reader's fast path (src/reader.ts) against the
// built sidecar and the fault agent's flood: every update, in seq order,
// as onFrame saw it on the wire, through turn.updates and
// turn.updateBatches(), with one update longer than a pipe read and with
// turns of several sessions ending while others still stream.
import { test } from "node:test";
import assert from "node:assert/strict";

import { spawnSidecar } from "../dist/index.js";
import { frameChecker } from "./schema-check.mjs";
import { faultOpen, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, workDir } from "./helpers.mjs";

/** seqsInOrder fails unless updates are consecutive seqs of session s and requestId rid. */
function seqsInOrder(updates, s, rid) {
  updates.forEach((u, i) => {
    assert.equal(u.session, s);
    assert.equal(u.requestId, rid);
    if (i > 0) assert.equal(u.seq, updates[i - 1].seq + 1, `${rid}: seq ${u.seq} after ${updates[i - 1].seq}`);
  });
}

test("a flood and an update longer than a pipe read reach turn.updates and turn.updateBatches() complete, in order, as on the wire", { skip: skipReason }, async (t) => {
  const flood = 5000;
  const long = 200_000;
  const mark = newMark();
  const stateDir = tempDir(t);
  const frames = frameChecker();
  const wire = new Map(); // requestId -> session/update params read
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir,
    env: sidecarEnv(mark),
    onFrame: (dir, m) => {
      frames.onFrame(dir, m);
      if (dir === "received" && m.method === "session/update") {
        const rid = m.params.requestId;
        if (!wire.has(rid)) wire.set(rid, []);
        wire.get(rid).push(m.params);
      }
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  const s = await sc.open(faultOpen("flood-1", workDir(t), mark, `flood=${flood},long-line=${long}`));

  const one = s.prompt({ requestId: "t1", prompt: "go" });
  const got = [];
  for await (const u of one.updates) got.push(u);
  assert.equal((await one.result).status, "completed");

  const two = s.prompt({ requestId: "t2", prompt: "go" });
  const batches = [];
  for await (const b of two.updateBatches()) batches.push(b);
  assert.equal((await two.result).status, "completed");
  assert.throws(() => two.updates[Symbol.asyncIterator](), TypeError, "one reading per turn");

  assert.ok(batches.every((b) => Array.isArray(b) && b.length > 0), "no empty batch");
  const flat = batches.flat();
  for (const [rid, ups] of [["t1", got], ["t2", flat]]) {
    assert.equal(ups.length, flood + 3, `${rid}: hello, the flood, the long line, usage_update`);
    seqsInOrder(ups, s.id, rid);
    assert.deepEqual(ups, wire.get(rid), `${rid}: what the wire had`);
    assert.ok(ups.some((u) => (u.update.content?.text ?? "").length === long), `${rid}: the long update`);
  }
  assert.equal(flat[0].seq, got.at(-1).seq + 1);
  await sc.shutdown();
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, []);
});

test("turns of several sessions flooding at once, their answers arriving while others stream: each turn complete and in order", { skip: skipReason }, async (t) => {
  const sessions = 4;
  const flood = 3000;
  const mark = newMark();
  const stateDir = tempDir(t);
  const sc = await spawnSidecar({ binary: sidecarBin, stateDir, env: sidecarEnv(mark) });
  t.after(() => sc.kill("SIGKILL"));
  const unclaimed = [];
  sc.on("update", (u) => unclaimed.push(u));
  const open = [];
  // Floods of different lengths, so that answers come while others run.
  for (let i = 0; i < sessions; i++) open.push(await sc.open(faultOpen(`flood-m${i}`, workDir(t), mark, `flood=${flood * (i + 1)}`)));
  for (let round = 0; round < 2; round++) {
    await Promise.all(
      open.map(async (s, i) => {
        const rid = `r${round}`;
        const turn = s.prompt({ requestId: rid, prompt: "go" });
        const ups = [];
        if (i % 2 === round % 2) for await (const u of turn.updates) ups.push(u);
        else for await (const b of turn.updateBatches()) ups.push(...b);
        assert.equal((await turn.result).status, "completed");
        assert.equal(ups.length, flood * (i + 1) + 2, `${s.id} ${rid}`);
        seqsInOrder(ups, s.id, rid);
      }),
    );
  }
  assert.deepEqual(unclaimed, [], "every update belonged to a running turn");
  await sc.shutdown();
  assert.deepEqual(markedPids(mark), []);
});
