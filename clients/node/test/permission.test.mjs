// askHandler (src/permission.ts): what a permission handler's answer
// becomes, and when the Sidecar's "handlerError" event hears why.
import { test } from "node:test";
import assert from "node:assert/strict";

import { askHandler, selectKind } from "../dist/permission.js";

const req = { session: "s-1", sessionKey: "k", requestId: "t1", toolCall: { toolCallId: "c1" },
  options: [{ optionId: "allow", name: "Allow", kind: "allow_once" }, { optionId: "deny", name: "Deny", kind: "reject_once" }] };

test("askHandler: a selection passes, cancelled passes quietly; a throw, a rejection or an unknown shape is cancelled and reported", async () => {
  const run = async (handler) => {
    const errors = [];
    const out = await askHandler(handler, req, new AbortController().signal, (e) => errors.push(e));
    return { out, errors };
  };
  let r = await run(() => ({ outcome: "selected", optionId: "allow" }));
  assert.deepEqual(r, { out: { outcome: "selected", optionId: "allow" }, errors: [] });
  r = await run(() => ({ outcome: "cancelled" }));
  assert.deepEqual(r, { out: { outcome: "cancelled" }, errors: [] });
  r = await run(() => {
    throw new Error("handler bug");
  });
  assert.deepEqual(r.out, { outcome: "cancelled" });
  assert.equal(r.errors[0].message, "handler bug");
  r = await run(async () => Promise.reject(new Error("async bug")));
  assert.equal(r.errors[0].message, "async bug");
  for (const bad of [undefined, { outcome: "selected" }, { optionId: "x" }, "allow_once"]) {
    r = await run(() => bad);
    assert.deepEqual(r.out, { outcome: "cancelled" }, JSON.stringify(bad));
    assert.ok(r.errors[0] instanceof TypeError, `${JSON.stringify(bad)}: ${r.errors[0]}`);
  }
});

test("askHandler: an ask settled first (aborted) is cancelled without a report", async () => {
  const ac = new AbortController();
  const errors = [];
  const pending = askHandler(() => new Promise(() => {}), req, ac.signal, (e) => errors.push(e));
  ac.abort();
  assert.deepEqual(await pending, { outcome: "cancelled" });
  assert.deepEqual(errors, []);
});

test("askHandler: an optionId the agent did not offer, or selectKind of an unknown kind, is cancelled and reported", async () => {
  for (const handler of [() => ({ outcome: "selected", optionId: "no-such-option" }), (r) => selectKind(r, "allow_forever")]) {
    const errors = [];
    const out = await askHandler(handler, req, new AbortController().signal, (e) => errors.push(e));
    assert.deepEqual(out, { outcome: "cancelled" });
    assert.ok(errors[0] instanceof TypeError, String(errors[0]));
  }
  assert.deepEqual(selectKind(req, "reject_once"), { outcome: "selected", optionId: "deny" });
  assert.deepEqual(selectKind(req, "allow_always"), { outcome: "cancelled" }); // a known kind the agent did not offer
});
