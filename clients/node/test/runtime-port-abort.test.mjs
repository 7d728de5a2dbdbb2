// openAcpxRuntimePort and its caller's AbortSignal: a signal aborted
// before the call spawns nothing and rejects ADMISSION_ABORTED; an abort
// during the session handshake rejects ADMISSION_ABORTED whose `cause` is
// the caller's exact abort reason, and leaves no process behind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { openAcpxRuntimePort } from "../dist/index.js";
import { faultBin, markedPids, newMark, sidecarBin, sidecarEnv, skipReason, tempDir, waitFor } from "./helpers.mjs";

test("the runtime port: a signal aborted before the call spawns nothing and rejects ADMISSION_ABORTED", async (t) => {
  const root = tempDir(t);
  const ran = join(root, "ran");
  // A "sidecar" that leaves a file behind if it is ever started.
  const bin = join(root, "fake-sidecar");
  writeFileSync(bin, `#!/bin/sh\ntouch '${ran}'\nsleep 5\n`);
  chmodSync(bin, 0o755);
  const reason = new Error("the caller changed its mind");
  const ac = new AbortController();
  ac.abort(reason);
  const err = await openAcpxRuntimePort({
    spawn: { binary: bin, stateDir: join(root, "state") },
    agent: "generic",
    command: { path: "/bin/true" },
    cwd: root,
    providerSessionKey: "pre-aborted",
    signal: ac.signal,
  }).then(
    () => assert.fail("the open succeeded"),
    (e) => e,
  );
  assert.equal(err.dataCode, "ADMISSION_ABORTED");
  assert.equal(err.code, -32800);
  assert.equal(err.cause, reason, "cause is the caller's exact abort reason");
  assert.equal(existsSync(ran), false, "the sidecar binary was started");
});

test("the runtime port: an abort during the handshake rejects ADMISSION_ABORTED with the caller's reason as cause", { skip: skipReason }, async (t) => {
  const mark = newMark();
  const root = tempDir(t);
  const work = join(root, "work");
  mkdirSync(work, { recursive: true });
  const rec = join(work, "agent.jsonl");
  const reason = { why: "host shutting down", at: Date.now() }; // any value, not only an Error
  const ac = new AbortController();
  const opening = openAcpxRuntimePort({
    spawn: { binary: sidecarBin, stateDir: join(root, "state"), env: sidecarEnv(mark) },
    agent: "generic",
    command: { path: faultBin, args: ["--mode", `hang-new,record=${rec}`] },
    cwd: work,
    providerSessionKey: "aborted-in-handshake",
    launchEnvironment: { ACPX_TEST_MARK: mark },
    signal: ac.signal,
  }).then(
    () => assert.fail("the open succeeded"),
    (e) => e,
  );
  await waitFor(
    () => existsSync(rec) && readFileSync(rec, "utf8").includes('"session/new"'),
    20000,
    "the agent to receive session/new",
  );
  ac.abort(reason);
  const err = await opening;
  assert.equal(err.dataCode, "ADMISSION_ABORTED");
  assert.equal(err.code, -32800);
  assert.equal(err.cause, reason, "cause is the caller's exact abort reason");
  assert.equal(err.proof?.complete, true, "the sidecar's cleanup proof is kept in data.cleanup");
  // The port shut its own sidecar down: nothing of the open survives.
  await waitFor(() => markedPids(mark).length === 0, 10000, "every marked process to be gone");
});
