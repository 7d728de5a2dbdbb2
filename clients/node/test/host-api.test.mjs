// The Sidecar methods a fresh-user run found missing or stuck: requests over
// the sidecar's maxFrameBytes refused before they are sent, session/events
// and sidecar/stats, and an idempotent shutdown.
import { test } from "node:test";
import assert from "node:assert/strict";

import { spawnSidecar, SidecarError, textOf } from "../dist/index.js";
import { frameChecker } from "./schema-check.mjs";
import { faultOpen, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, workDir } from "./helpers.mjs";

/** within fails the test after ms instead of letting a promise that never settles hang it. */
function within(p, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

test("a request over maxFrameBytes is refused at once and not sent; its requestId stays usable", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const frames = frameChecker();
  const sent = [];
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir,
    env: sidecarEnv(mark),
    args: ["--max-frame-bytes", "4096"],
    onFrame: (dir, msg) => {
      frames.onFrame(dir, msg);
      if (dir === "sent") sent.push(msg);
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  assert.equal(sc.info.capabilities.maxFrameBytes, 4096);
  const s = await sc.open(faultOpen("big", workDir(t), mark));

  const before = sent.length;
  const big = s.prompt({ requestId: "t1", prompt: "x".repeat(5000) });
  await assert.rejects(within(big.result, 10_000, "the oversized prompt"), (err) => {
    assert.ok(err instanceof SidecarError);
    assert.equal(err.code, -32600);
    assert.equal(err.dataCode, "INVALID_REQUEST");
    assert.equal(err.method, "session/prompt");
    assert.match(err.message, /\b5\d{3} bytes\b.*\b4096\b/, "names the frame's size and the limit");
    assert.equal(err.data.maxFrameBytes, 4096);
    assert.ok(err.data.frameBytes > 5000);
    return true;
  });
  assert.equal(sent.length, before, "the oversized frame was never written");
  for await (const _ of big.updates) assert.fail("no updates for a refused turn");

  // The requestId was not used and is not stuck in this client.
  const ok = s.prompt({ requestId: "t1", prompt: "small" });
  assert.equal((await within(ok.result, 20_000, "the small prompt")).status, "completed");

  // Exactly at the limit is sent; one byte more is not (session/list
  // ignores unknown members, docs/protocol.md §3). The next request id is
  // the last sent one + 1 (vscode-jsonrpc counts up).
  const frameOf = (pad) => {
    const lastId = sent.filter((m) => m.id !== undefined && m.method).at(-1).id;
    return Buffer.byteLength(JSON.stringify({ jsonrpc: "2.0", id: lastId + 1, method: "session/list", params: { pad } }));
  };
  let pad = "";
  pad = "a".repeat(4096 - frameOf(pad));
  assert.equal(frameOf(pad), 4096);
  assert.ok(Array.isArray((await within(sc.request("session/list", { pad }), 10_000, "a 4096-byte frame")).sessions));
  pad = "a".repeat(4097 - frameOf(""));
  assert.equal(frameOf(pad), 4097);
  await assert.rejects(sc.request("session/list", { pad }), { code: -32600, dataCode: "INVALID_REQUEST", message: /4097 bytes.*4096/ });
  assert.deepEqual((await sc.list()).map((e) => e.sessionKey), ["big"], "the connection keeps working");

  await sc.shutdown();
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, [], "every frame fits docs/protocol.schema.json");
});

test("session/events pages through a key's journal; sidecar/stats counts; shutdown is idempotent", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const stateDir = tempDir(t);
  const frames = frameChecker();
  const sc = await spawnSidecar({ binary: sidecarBin, stateDir, env: sidecarEnv(mark), onFrame: frames.onFrame });
  t.after(() => sc.kill("SIGKILL"));
  const s = await sc.open(faultOpen("ev-1", workDir(t), mark));
  const seen = [];
  for (const rid of ["t1", "t2"]) {
    const turn = s.prompt({ requestId: rid, prompt: "hello" });
    for await (const u of turn.updates) seen.push(u);
    assert.equal((await turn.result).status, "completed");
  }
  assert.ok(seen.some((u) => /hello from faultagent/.test(textOf(u) ?? "")), "textOf reads a text chunk");
  await s.close({ reason: "events test" });

  const all = await sc.events({ sessionKey: "ev-1" });
  assert.equal(all.truncated, false);
  const updates = all.events.filter((e) => e.method === "session/update");
  assert.deepEqual(
    updates.map((e) => e.params.seq),
    seen.map((u) => u.seq),
    "the journal holds every update the host got, in order",
  );
  assert.ok(all.events.every((e) => e.params.session === s.id), "the key's latest session");
  assert.equal(all.nextSeq, all.events.at(-1).seq);
  assert.equal(all.nextN, all.events.at(-1).n);
  assert.equal(all.complete, true);
  assert.deepEqual(all.gaps, []);
  assert.deepEqual(
    all.events.map((e) => e.n),
    all.events.map((_, i) => i + 1),
    "n numbers the key's entries from 1 with no gap",
  );

  const paged = [];
  let pages = 0;
  for await (const page of sc.eventPages({ sessionKey: "ev-1", limit: 1 })) {
    pages++;
    paged.push(...page.events);
  }
  assert.deepEqual(paged, all.events, "paging with nextN returns every entry once");
  assert.ok(pages > 1);
  const bySeq = [];
  for await (const page of sc.eventPages({ sessionKey: "ev-1", afterSeq: 0, limit: 1 })) bySeq.push(...page.events);
  assert.deepEqual(bySeq, all.events, "paging the latest session by seq returns the same entries");
  const tail = await sc.events({ sessionKey: "ev-1", afterSeq: updates[0].seq });
  assert.ok(tail.events.every((e) => e.seq > updates[0].seq));
  assert.deepEqual(await sc.events({ sessionKey: "no-such-key" }), {
    events: [],
    nextN: 0,
    nextSeq: 0,
    gaps: [],
    complete: true,
    truncated: false,
  });
  await assert.rejects(sc.events({ sessionKey: "ev-1", limit: 0 }), { code: -32602, dataCode: "INVALID_PARAMS", field: "limit" });

  const st = await sc.stats();
  assert.equal(st.turns.completed, 2);
  assert.equal(st.updatesForwarded, seen.length);
  assert.equal(st.proofs.complete, 1);
  assert.equal(st.sessions.closed, 1);

  // Two shutdowns at once (and one after): one request, the same proofs.
  const other = await sc.open(faultOpen("ev-2", workDir(t), mark));
  const [a, b] = await Promise.all([sc.shutdown(), sc.shutdown()]);
  assert.equal(a.length, 1);
  assert.equal(a[0].session, other.id);
  assert.deepEqual(b, a);
  assert.deepEqual(await sc.shutdown(), a);
  assert.equal(sc.exitCode, 0);
  assert.deepEqual(markedPids(mark), []);
  // The one frame off the schema is the limit: 0 this test sent on purpose.
  assert.equal(frames.errors.length, 1, frames.errors.join("\n"));
  assert.match(frames.errors[0], /^session\/events params is not a valid EventsParams: .*limit/);
});
