// Shared test setup: the built binaries (the Makefile's node-test target
// builds them and passes their paths), a marker for every process a test
// starts (internal/testmark: the Makefile's leakcheck finds this run's
// leftovers by it), and a wait on the process table.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";

export const sidecarBin = process.env.ACPX_SIDECAR_BINARY ?? "";
export const faultBin = process.env.ACPX_TEST_FAULTAGENT ?? "";
export const haveBinaries = sidecarBin !== "" && faultBin !== "";
/** Why a test is skipped without the binaries (make node-test sets them). */
export const skipReason = haveBinaries ? false : "ACPX_SIDECAR_BINARY and ACPX_TEST_FAULTAGENT are not set (run `make node-test`)";
if (!haveBinaries && process.env.CI) throw new Error(skipReason);

/** newMark returns a fresh ACPX_TEST_MARK value with this run's prefix. */
export function newMark() {
  const hex = randomBytes(8).toString("hex");
  const run = process.env.ACPX_TEST_RUN;
  return run ? `${run}-${hex}` : hex;
}

/** tempDir makes a directory removed when the test ends. */
export function tempDir(t, prefix = "acpx-node-") {
  const d = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

const workDirs = new WeakMap();

/**
 * workDir is the test's agent workspace: one temporary directory per test,
 * apart from its state dir (the sidecar's default sandbox never lets an
 * agent write a state dir, so a cwd inside one is refused: docs/protocol.md
 * §19).
 */
export function workDir(t) {
  if (!workDirs.has(t)) workDirs.set(t, tempDir(t, "acpx-node-work-"));
  return workDirs.get(t);
}

/** markedPids lists live (non-zombie) processes whose environment holds mark. */
export function markedPids(mark) {
  const needle = `ACPX_TEST_MARK=${mark}\0`;
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      const env = readFileSync(`/proc/${name}/environ`, "latin1") + "\0";
      if (env.includes(needle)) out.push(Number(name));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/** alive reports whether pid is a live, non-zombie process. */
export function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** waitFor polls cond (the process table) until true, failing after ms. */
export async function waitFor(cond, ms, what) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** sidecarEnv is the sidecar's environment: ours plus the marker. */
export function sidecarEnv(mark) {
  return { ...process.env, ACPX_TEST_MARK: mark };
}

/** faultOpen is session/open params for the fault agent. */
export function faultOpen(key, cwd, mark, modes = "normal", extra = {}) {
  return {
    sessionKey: key,
    agent: "generic",
    command: { path: faultBin, args: ["--mode", modes] },
    cwd,
    env: { ACPX_TEST_MARK: mark },
    ...extra,
  };
}
