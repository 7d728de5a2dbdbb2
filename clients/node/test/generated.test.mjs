// src/protocol.gen.ts is what scripts/gen-types.mjs makes of
// docs/protocol.schema.json today: a schema change without `npm run gen`
// fails here (and in `npm run check`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

test("the generated protocol types are current with docs/protocol.schema.json", () => {
  const script = fileURLToPath(new URL("../scripts/gen-types.mjs", import.meta.url));
  execFileSync(process.execPath, [script, "--check"], { stdio: "pipe" });
});

test("the generated types name every schema definition and method", () => {
  const schema = JSON.parse(readFileSync(new URL("../../../docs/protocol.schema.json", import.meta.url), "utf8"));
  const gen = readFileSync(new URL("../src/protocol.gen.ts", import.meta.url), "utf8");
  for (const name of Object.keys(schema.$defs)) {
    assert.match(gen, new RegExp(`^export (?:type|interface) ${name}\\b`, "m"), `$defs/${name} is declared`);
  }
  for (const method of Object.keys(schema["x-methods"])) {
    assert.ok(gen.includes(`  ${JSON.stringify(method)}: {`), `ProtocolMethods has ${method}`);
  }
});
