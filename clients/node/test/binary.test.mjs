// resolveBinary: the binary option, then ACPX_SIDECAR_BINARY, then the
// platform package installed next to the client (the esbuild way).
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { resolveBinary, BINARY_ENV, PLATFORM_PACKAGES } from "../dist/index.js";
import { tempDir } from "./helpers.mjs";

function fakeExecutable(path) {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, "#!/bin/sh\n");
  chmodSync(path, 0o755);
  return path;
}

test("resolveBinary: option, then env, then the platform package", (t) => {
  const root = tempDir(t);
  // A project with the client and both platform packages installed.
  const from = pathToFileURL(join(root, "node_modules", "@acpx-sidecar", "client", "dist", "binary.js")).href;
  for (const [plat, pkg] of Object.entries(PLATFORM_PACKAGES)) {
    const dir = join(root, "node_modules", ...pkg.split("/"));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: pkg, version: "0.1.0" }));
    fakeExecutable(join(dir, "bin", "acpx-sidecar"));
    assert.equal(resolveBinary(undefined, {}, from, plat), join(dir, "bin", "acpx-sidecar"));
  }
  const explicit = fakeExecutable(join(root, "explicit", "acpx-sidecar"));
  const fromEnv = fakeExecutable(join(root, "env", "acpx-sidecar"));
  assert.equal(resolveBinary(explicit, { [BINARY_ENV]: fromEnv }, from, "linux-x64"), explicit);
  assert.equal(resolveBinary(undefined, { [BINARY_ENV]: fromEnv }, from, "linux-x64"), fromEnv);
});

test("resolveBinary: clear BINARY_NOT_FOUND errors", (t) => {
  const root = tempDir(t);
  const from = pathToFileURL(join(root, "x.js")).href;
  assert.throws(() => resolveBinary(undefined, {}, from, "win32-x64"), { dataCode: "BINARY_NOT_FOUND", message: /no binary package for win32-x64/ });
  assert.throws(() => resolveBinary(undefined, {}, from, "darwin-arm64"), { dataCode: "BINARY_NOT_FOUND", message: /@acpx-sidecar\/darwin-arm64 is not installed/ });
  assert.throws(() => resolveBinary(undefined, {}, from, "linux-x64"), { dataCode: "BINARY_NOT_FOUND", message: /@acpx-sidecar\/linux-x64 is not installed/ });
  // Installing only the client's tarball installs no binary: the message says how to get one.
  assert.throws(() => resolveBinary(undefined, {}, from, "linux-x64"), {
    message: /make npm-pack.*"overrides": \{"@acpx-sidecar\/linux-x64": "file:\/abs\/dist\/npm\/acpx-sidecar-linux-x64-<version>\.tgz"\}.*ACPX_SIDECAR_BINARY/,
  });
  assert.throws(() => resolveBinary("relative/acpx-sidecar"), { dataCode: "BINARY_NOT_FOUND", message: /not an absolute path/ });
  writeFileSync(join(root, "plain"), "");
  assert.throws(() => resolveBinary(undefined, { [BINARY_ENV]: join(root, "plain") }, from), { dataCode: "BINARY_NOT_FOUND", message: /ACPX_SIDECAR_BINARY: .* not an executable/ });
});
