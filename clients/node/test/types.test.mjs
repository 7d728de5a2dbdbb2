// A strict TypeScript host type-checks against the built .d.ts:
// test/types/fixture.ts (dataCode is the schema's union, textOf, events,
// stats, queue) and examples/nodehost/host.mjs under checkJs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

test("a strict TypeScript host and examples/nodehost/host.mjs type-check against dist/*.d.ts", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const project = fileURLToPath(new URL("./types/tsconfig.json", import.meta.url));
  try {
    execFileSync(process.execPath, [tsc, "-p", project], { stdio: "pipe", encoding: "utf8" });
  } catch (err) {
    assert.fail(`tsc -p test/types failed:\n${err.stdout}${err.stderr}`);
  }
});
