/**
 * Finding the acpx-sidecar executable, the way native tools on npm do
 * (esbuild, codex-acp): the client lists one package per platform as an
 * optional dependency (`@acpx-sidecar/linux-x64`, `@acpx-sidecar/linux-arm64`,
 * `@acpx-sidecar/darwin-arm64`, `@acpx-sidecar/darwin-x64`, each with
 * `os`/`cpu` fields so npm installs only the matching one), and each holds
 * the binary at `bin/acpx-sidecar`.
 */

import { accessSync, constants, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join } from "node:path";

import { LocalDataCode, localError } from "./errors.js";

/** The environment variable that names the binary when no `binary` option is given. */
export const BINARY_ENV = "ACPX_SIDECAR_BINARY";

/** Platforms with a binary package: `${process.platform}-${process.arch}` → package name. */
export const PLATFORM_PACKAGES: Readonly<Record<string, string>> = {
  "linux-x64": "@acpx-sidecar/linux-x64",
  "linux-arm64": "@acpx-sidecar/linux-arm64",
  "darwin-arm64": "@acpx-sidecar/darwin-arm64",
  "darwin-x64": "@acpx-sidecar/darwin-x64",
};

/**
 * resolveBinary returns the absolute path of the acpx-sidecar executable:
 * `explicit` when given, else `$ACPX_SIDECAR_BINARY` when set and
 * non-empty, else `bin/acpx-sidecar` of this platform's package. Throws a
 * SidecarError `BINARY_NOT_FOUND` when the chosen path is not an
 * executable regular file, when the platform has no package (acpx-sidecar
 * runs on Linux and macOS; Windows is refused, docs/operations.md "macOS"),
 * or when its package is not installed (for example
 * `npm install --omit=optional`).
 *
 * `from` is where the platform package is looked up (a file inside a
 * package directory); it defaults to this module, so the package that
 * npm installed next to @acpx-sidecar/client is found.
 */
export function resolveBinary(
  explicit?: string,
  env: NodeJS.ProcessEnv = process.env,
  from: string = import.meta.url,
  platform = `${process.platform}-${process.arch}`,
): string {
  if (explicit) return checkExecutable(explicit, "the binary option");
  const fromEnv = env[BINARY_ENV];
  if (fromEnv) return checkExecutable(fromEnv, BINARY_ENV);
  const pkg = PLATFORM_PACKAGES[platform];
  if (!pkg) {
    throw localError(
      LocalDataCode.BINARY_NOT_FOUND,
      `acpx-sidecar has no binary package for ${platform} (supported: ${Object.keys(PLATFORM_PACKAGES).join(", ")}); ` +
        `pass the binary option or set ${BINARY_ENV}`,
    );
  }
  let manifest: string;
  try {
    manifest = createRequire(from).resolve(`${pkg}/package.json`);
  } catch (err) {
    throw localError(
      LocalDataCode.BINARY_NOT_FOUND,
      `${pkg} is not installed, so there is no acpx-sidecar binary. It is an optional dependency of ` +
        `@acpx-sidecar/client that npm skips when it cannot get it (not yet on a registry) or under --omit=optional. ` +
        `Fix: build the tarballs (\`make npm-pack\` in acpx-sidecar writes dist/npm/), add to your package.json ` +
        `"overrides": {"${pkg}": "file:/abs/dist/npm/${pkg.slice(1).replace("/", "-")}-<version>.tgz"} and run npm install again; ` +
        `or pass the binary option or set ${BINARY_ENV} to an acpx-sidecar executable`,
      "",
      err,
    );
  }
  return checkExecutable(join(dirname(manifest), "bin", "acpx-sidecar"), pkg);
}

function checkExecutable(path: string, source: string): string {
  if (!isAbsolute(path)) {
    throw localError(LocalDataCode.BINARY_NOT_FOUND, `${source}: ${path} is not an absolute path`);
  }
  try {
    if (!statSync(path).isFile()) throw new Error("not a regular file");
    accessSync(path, constants.X_OK);
  } catch (err) {
    throw localError(
      LocalDataCode.BINARY_NOT_FOUND,
      `${source}: ${path} is not an executable file (${(err as Error).message})`,
      "",
      err,
    );
  }
  return path;
}
