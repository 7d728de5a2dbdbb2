// Elicitation and withdrawn requests (docs/protocol.md §22) through
// @acpx-sidecar/client: onElicitation answers the fault agent's
// elicitation/create (mode elicit=…), and a request the agent withdraws
// ($/cancel_request) aborts its handler's signal.
import { test } from "node:test";
import assert from "node:assert/strict";

import { spawnSidecar, accept } from "../dist/index.js";
import { frameChecker } from "./schema-check.mjs";
import { faultOpen, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, workDir } from "./helpers.mjs";

/** turnText runs one turn and returns its agent text. */
async function turnText(s) {
  const turn = s.prompt({ requestId: "t1", prompt: "ask" });
  const parts = [];
  for await (const u of turn.updates) parts.push(u.update.content?.text ?? "");
  const res = await turn.result;
  assert.equal(res.status, "completed", JSON.stringify(res));
  return parts.join("\n");
}

test("onElicitation answers a form elicitation; agents are offered both modes; the audit is an event", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const frames = frameChecker();
  const asked = [];
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir: tempDir(t),
    env: sidecarEnv(mark),
    onFrame: frames.onFrame,
    onElicitation: (req) => {
      asked.push(req);
      return accept({ strategy: "conservative", count: 2 });
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  const decided = [];
  sc.on("elicitationDecided", (d) => decided.push(d));
  const s = await sc.open(faultOpen("node-elicit", workDir(t), mark, "elicit=form"));
  const text = await turnText(s);
  assert.match(text, /elicit caps: \{"form":\{\},"url":\{\}\}/);
  assert.match(text, /elicit: accept \{"strategy":"conservative","count":2\}/, "the host's content verbatim");
  assert.equal(asked.length, 1);
  assert.equal(asked[0].elicitation.mode, "form");
  assert.equal(asked[0].requestId, "t1");
  assert.deepEqual(decided.map((d) => [d.action, d.rule]), [["accept", "host"]]);
  await s.close({ reason: "done" });
  await sc.shutdown();
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, [], "every frame both ways fits docs/protocol.schema.json");
});

test("a withdrawn elicitation or permission aborts its handler's signal; the agent gets -32800", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const frames = frameChecker();
  const aborted = [];
  const wait = (what) => (_req, { signal }) =>
    new Promise((resolve) => {
      signal.addEventListener("abort", () => {
        aborted.push(what);
        resolve(what === "elicitation" ? accept({ strategy: "balanced" }) : { outcome: "cancelled" });
      });
    });
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir: tempDir(t),
    env: sidecarEnv(mark),
    onFrame: frames.onFrame,
    onElicitation: wait("elicitation"),
    onPermissionRequest: wait("permission"),
  });
  t.after(() => sc.kill("SIGKILL"));
  const decided = [];
  const permission = [];
  sc.on("elicitationDecided", (d) => decided.push(d.action));
  sc.on("permission", (d) => permission.push(d.decision));
  const s1 = await sc.open(faultOpen("node-withdraw-e", workDir(t), mark, "elicit=form,elicit-withdraw=200"));
  assert.match(await turnText(s1), /elicit: error -32800/);
  const s2 = await sc.open(
    faultOpen("node-withdraw-p", workDir(t), mark, "permission=execute,permission-withdraw=200", {
      permissionPolicy: { escalate: ["execute"] },
    }),
  );
  assert.match(await turnText(s2), /permission: error -32800/);
  assert.deepEqual(aborted, ["elicitation", "permission"]);
  assert.deepEqual(decided, ["withdrawn"]);
  assert.deepEqual(permission, ["escalated", "withdrawn"]);
  await s1.close({ reason: "done" });
  await s2.close({ reason: "done" });
  await sc.shutdown();
  assert.deepEqual(markedPids(mark), []);
  assert.deepEqual(frames.errors, []);
});
