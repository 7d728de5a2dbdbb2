// The connection's reader (src/reader.ts) and the turn queue
// (src/queue.ts) without a sidecar: LSP frames split anywhere, non-ASCII
// bodies, bad headers and bodies, the fast path for session/update and
// the wire order it keeps around messages that vscode-jsonrpc dispatches.
import { test } from "node:test";
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";

import { LspReader } from "../dist/reader.js";
import { UpdateQueue } from "../dist/queue.js";

const frame = (msg) => {
  const body = Buffer.from(JSON.stringify(msg), "utf8");
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "latin1"), body]);
};
const update = (seq, text = `u${seq}`) => ({
  jsonrpc: "2.0",
  method: "session/update",
  params: { session: "s-1", requestId: "t1", seq, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } },
});
const nextTurn = () => new Promise((r) => setImmediate(r));

/** reader returns a reader on a stream, what it passed where, and a feed function. */
function reader() {
  const stream = new PassThrough();
  const frames = [];
  const r = new LspReader(stream, (dir, m) => frames.push([dir, m]));
  const order = []; // ["fast"|"rpc", message or params]
  const errors = [];
  r.updates = (p) => order.push(["fast", p]);
  r.onError((e) => errors.push(e));
  r.listen((m) => order.push(["rpc", m]));
  return { r, order, frames, errors, feed: (...bufs) => bufs.forEach((b) => stream.emit("data", b)) };
}

test("frames split at every byte, and non-ASCII bodies, read as JSON.parse reads them", () => {
  const msgs = [update(1, "héllo → 世界 🎉"), update(2), { jsonrpc: "2.0", method: "cleanup/proof", params: { proof: { complete: true } } }, update(3, "x".repeat(70000))];
  const all = Buffer.concat(msgs.map(frame));
  for (const step of [1, 3, 7, 4096, all.length]) {
    const { order, frames, errors, feed } = reader();
    for (let i = 0; i < all.length; i += step) feed(all.subarray(i, i + step));
    assert.deepEqual(errors, []);
    assert.deepEqual(frames.map(([d, m]) => [d, m]), msgs.map((m) => ["received", m]), `step ${step}: onFrame saw every message`);
    // The proof went to vscode-jsonrpc; update 3 waits behind it.
    assert.deepEqual(order, [["fast", msgs[0].params], ["fast", msgs[1].params], ["rpc", msgs[2]]], `step ${step}`);
  }
});

test("header variants are read; a header without a usable Content-Length and a body that is not JSON are errors", () => {
  const { order, errors, feed } = reader();
  const body = Buffer.from(JSON.stringify(update(1)));
  feed(Buffer.from(`Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length:  ${body.length} \r\n\r\n`), body);
  feed(Buffer.from("Content-Length: 5\r\n\r\n{bad}"));
  feed(frame(update(2)));
  assert.deepEqual(order.map(([w, p]) => [w, p.seq]), [["fast", 1], ["fast", 2]]);
  assert.equal(errors.length, 1, "the bad body is an error, the stream goes on");
  const bad = reader();
  bad.feed(Buffer.from("Content-Length: x1\r\n\r\n{}"));
  assert.equal(bad.errors.length, 1);
  assert.match(bad.errors[0].message, /Content-Length/);
});

test("what is read while a message waits in vscode-jsonrpc follows it, in order, after it was dispatched", async () => {
  const { r, order, feed } = reader();
  const resp = { jsonrpc: "2.0", id: 1, result: { status: "completed" } };
  const notif = { jsonrpc: "2.0", method: "session/exited", params: { session: "s-2" } };
  feed(Buffer.concat([frame(update(1)), frame(resp), frame(update(2)), frame(notif), frame(update(3))]));
  assert.deepEqual(order.map(([w]) => w), ["fast", "rpc"]);
  assert.ok(r.busy);
  r.dispatched({ ...resp }); // not the message handed on: changes nothing
  r.dispatched(order[1][1]);
  assert.equal(order.length, 2, "held until the next turn of the event loop");
  await nextTurn();
  assert.deepEqual(order.map(([w, m]) => [w, m.seq ?? m.method]), [["fast", 1], ["rpc", undefined], ["fast", 2], ["rpc", "session/exited"]]);
  r.dispatched(order[3][1]);
  await nextTurn();
  assert.deepEqual(order.map(([w, m]) => [w, m.seq ?? m.method]).slice(4), [["fast", 3]]);
  assert.equal(r.busy, false);
  feed(frame(update(4)));
  assert.deepEqual(order.at(-1), ["fast", update(4).params], "nothing waits: updates go straight through again");
});

test("a $/cancelRequest (which vscode-jsonrpc may consume without dispatching it) does not hold the stream; a dispatch of another message does not release it", async () => {
  const { r, order, feed } = reader();
  feed(frame({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 9 } }), frame(update(1)));
  assert.deepEqual(order.map(([w]) => w), ["rpc", "fast"]);
  const resp = { jsonrpc: "2.0", id: 5, result: {} };
  feed(frame(resp), frame(update(2)));
  r.dispatched(order[0][1]); // the cancel, dispatched late: not what is waited for
  await nextTurn();
  assert.equal(order.length, 3, "update 2 still held behind the response");
  r.dispatched(order[2][1]);
  await nextTurn();
  assert.deepEqual(order.at(-1), ["fast", update(2).params]);
  assert.equal(r.busy, false);
});

test("UpdateQueue: updateBatches() yields non-empty arrays in order, everything pushed before the event loop turns in one; one reading only", async () => {
  const q = new UpdateQueue();
  const got = [];
  const reading = (async () => {
    for await (const b of q.batches()) got.push(b);
  })();
  await nextTurn();
  for (let i = 1; i <= 5; i++) q.push(i);
  await nextTurn();
  q.push(6);
  q.push(7);
  q.end();
  q.push(8); // after end: ignored
  await reading;
  assert.deepEqual(got, [[1, 2, 3, 4, 5], [6, 7]]);
  assert.throws(() => q[Symbol.asyncIterator](), TypeError);
  assert.throws(() => q.batches(), TypeError);

  const late = new UpdateQueue();
  for (let i = 1; i <= 3; i++) late.push(i);
  late.end();
  const items = [];
  for await (const x of late) items.push(x);
  assert.deepEqual(items, [1, 2, 3], "a reader that starts late loses nothing");

  const early = new UpdateQueue();
  early.push(1);
  early.push(2);
  for await (const b of early.batches()) {
    assert.deepEqual(b, [1, 2]);
    break;
  }
  early.push(3);
  assert.equal(early.isEnded, true, "break ends the queue");
});
