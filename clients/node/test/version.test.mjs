// The client's clientInfo.version is its own package.json version (one
// value, stamped into every package by `make npm-pack`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { spawnSidecar } from "../dist/index.js";
import { newMark, sidecarBin, sidecarEnv, skipReason, tempDir } from "./helpers.mjs";

test("initialize sends clientInfo with the package's version", { skip: skipReason }, async (t) => {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const sent = [];
  const sc = await spawnSidecar({
    binary: sidecarBin,
    stateDir: tempDir(t),
    env: sidecarEnv(newMark()),
    onFrame: (dir, m) => {
      if (dir === "sent" && m.method === "initialize") sent.push(m);
    },
  });
  t.after(() => sc.kill("SIGKILL"));
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0].params.clientInfo, { name: "@acpx-sidecar/client", version: pkg.version });
  assert.equal(sc.info.serverInfo.name, "acpx-sidecar");
  await sc.shutdown();
});
