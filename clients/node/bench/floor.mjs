// The Node host's floor benchmark (issue 22; docs/architecture.md,
// "Performance"), run by `make bench` (`make node-bench` alone): the built
// client (dist/) against a bare reader of the same sidecar written here
// (readline + JSON.parse of every line, the sidecar's default ndjson
// framing), on the fault agent's flood, the runs alternated (client,
// client batches, floor, then the next round starting one later) so that
// machine noise falls on all; medians are printed. Each side has sessions
// of its own (a fresh one per turn for the single-session run); a first
// round, not measured, warms the JIT up. Host CPU is this
// process's (process.cpuUsage: user + system, every thread) from the
// session/prompt sent to its result; the sidecar's and agents' CPU is not
// in it.
//
// Env: ACPX_SIDECAR_BINARY, ACPX_TEST_FAULTAGENT (the built binaries),
// ACPX_BENCH_FLOOR_UPDATES (updates per measured run, default 200000),
// ACPX_BENCH_FLOOR_ROUNDS (runs of each side, default 5),
// ACPX_BENCH_FLOOR_SESSIONS (sessions of the concurrent flood, default
// 100), ACPX_BENCH_OPENS (opens of the open -> result run, default 200).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { spawnSidecar } from "../dist/index.js";

const sidecarBin = process.env.ACPX_SIDECAR_BINARY;
const faultBin = process.env.ACPX_TEST_FAULTAGENT;
if (!sidecarBin || !faultBin) throw new Error("set ACPX_SIDECAR_BINARY and ACPX_TEST_FAULTAGENT (make node-bench does)");
const envInt = (name, def) => {
  const n = Number.parseInt(process.env[name] ?? "", 10);
  return n > 0 ? n : def;
};
const TOTAL = envInt("ACPX_BENCH_FLOOR_UPDATES", 200000);
const ROUNDS = envInt("ACPX_BENCH_FLOOR_ROUNDS", 5);
const SESSIONS = envInt("ACPX_BENCH_FLOOR_SESSIONS", 100);
const OPENS = envInt("ACPX_BENCH_OPENS", 200);

const dirs = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "acpx-node-bench-"));
  dirs.push(d);
  return d;
};
const loadAvg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const cpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.min(s.length - 1, Math.round((s.length * p) / 100) - 1))];
};
const openParams = (key, cwd, modes) => ({
  sessionKey: key,
  agent: "generic",
  command: { path: faultBin, args: ["--mode", modes] },
  cwd,
  permissionMode: "approve-reads",
  nonInteractivePermissions: "deny",
});

/** measure runs f and returns this process's CPU (µs) and wall (ms). */
async function measure(f) {
  const c0 = cpuMicros();
  const t0 = performance.now();
  await f();
  return { cpu: cpuMicros() - c0, wall: performance.now() - t0 };
}

/** RawSidecar: the bare reader. readline + JSON.parse of every line. */
class RawSidecar {
  constructor() {
    this.child = spawn(sidecarBin, ["--state-dir", tempDir()], { stdio: ["pipe", "pipe", "ignore"] });
    this.nextId = 0;
    this.pending = new Map(); // id -> {resolve, reject}
    this.updates = 0;
    const rl = createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    rl.on("line", (line) => {
      const m = JSON.parse(line);
      if (m.method === "session/update") {
        this.updates++;
        return;
      }
      if (m.method !== undefined) return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(new Error(JSON.stringify(m.error)));
      else p.resolve(m.result);
    });
    this.closed = new Promise((r) => this.child.once("close", r));
  }
  call(method, params) {
    const id = ++this.nextId;
    this.child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }
  async close() {
    this.child.stdin.end();
    await this.closed;
  }
}

let hasBatches = false; // the built client has Turn.updateBatches()

/** One turn on every session at once through turn.updates (or updateBatches()). */
async function clientTurn(sessions, round, perTurn, batches) {
  await Promise.all(
    sessions.map(async (s) => {
      const turn = s.prompt({ requestId: `t${round}`, prompt: "go" });
      hasBatches = typeof turn.updateBatches === "function";
      let n = 0;
      if (batches) for await (const b of turn.updateBatches()) n += b.length;
      else for await (const _ of turn.updates) n++;
      const res = await turn.result;
      if (res.status !== "completed" || n !== perTurn) throw new Error(`${s.id}: ${res.status}, ${n} updates, want ${perTurn}`);
    }),
  );
}

async function rawTurn(raw, sessions, round, perTurn) {
  raw.updates = 0;
  const results = await Promise.all(sessions.map((s) => raw.call("session/prompt", { session: s, requestId: `t${round}`, prompt: "go" })));
  for (const r of results) if (r.status !== "completed") throw new Error(`prompt result ${JSON.stringify(r)}`);
  if (raw.updates !== perTurn * sessions.length) throw new Error(`${raw.updates} updates, want ${perTurn * sessions.length}`);
}

/**
 * floor measures ROUNDS turns of `sessions` sessions on each side. Each
 * side has sessions of its own, so every agent runs one turn per round
 * (the fault agent keeps each session's history, which slows it as it
 * grows); with one session, each measured turn gets a fresh session.
 */
async function floor(sessions) {
  const perTurn = Math.floor(TOTAL / sessions);
  const total = perTurn * sessions;
  // A fault-agent turn: a hello chunk, flood=N chunks, a usage_update.
  const modes = `flood=${perTurn - 2}`;
  const sc = await spawnSidecar({ binary: sidecarBin, stateDir: tempDir() });
  const raw = new RawSidecar();
  await raw.call("initialize", { protocolVersion: 1, clientInfo: { name: "bench", version: "0" } });
  const cwd = tempDir();
  let keys = 0;
  const sides = {
    client: { open: () => sc.open(openParams(`k${keys++}`, cwd, modes)), close: (s) => s.close(), turn: (ss, r) => clientTurn(ss, r, perTurn, false) },
    batches: { open: () => sc.open(openParams(`k${keys++}`, cwd, modes)), close: (s) => s.close(), turn: (ss, r) => clientTurn(ss, r, perTurn, true) },
    floor: {
      open: async () => (await raw.call("session/open", openParams(`k${keys++}`, cwd, modes))).session,
      close: (s) => raw.call("session/close", { session: s }),
      turn: (ss, r) => rawTurn(raw, ss, r, perTurn),
    },
  };
  const openN = async (side, n) => {
    const ss = [];
    for (let i = 0; i < n; i++) ss.push(await side.open());
    return ss;
  };
  const fresh = sessions === 1;
  const sets = {};
  if (!fresh) for (const name of Object.keys(sides)) sets[name] = await openN(sides[name], sessions);
  const samples = { client: [], batches: [], floor: [] };
  const order = ["client", "batches", "floor"];
  // Round -1 is not measured: it warms the JIT up on every path.
  for (let r = -1; r < ROUNDS; r++) {
    // Each round starts with the next side (a b c, b c a, …), so that what
    // one turn leaves behind (the journal's writeback) falls on all alike.
    for (const name of [...order.slice((r + 3) % 3), ...order.slice(0, (r + 3) % 3)]) {
      if (name === "batches" && !hasBatches) continue;
      const side = sides[name];
      const ss = fresh ? await openN(side, 1) : sets[name];
      const m = await measure(() => side.turn(ss, r));
      if (r >= 0) samples[name].push(m);
      if (fresh) await side.close(ss[0]);
    }
  }
  const med = (ss) => ({ cpu: median(ss.map((s) => s.cpu)) / total, wall: median(ss.map((s) => s.wall)) });
  const f = med(samples.floor);
  const row = (name, ss) => {
    const m = med(ss);
    return `${name} ${m.cpu.toFixed(2)} µs CPU/update, ${m.wall.toFixed(0)} ms (CPU ×${(m.cpu / f.cpu).toFixed(2)}, wall ×${(m.wall / f.wall).toFixed(2)})`;
  };
  console.log(
    `Node host, ${sessions} session(s), ${total} updates, medians of ${ROUNDS} alternated runs (load ${loadAvg()}): ` +
      [row("client (turn.updates)", samples.client), ...(hasBatches ? [row("client (turn.updateBatches())", samples.batches)] : []),
        `floor (readline + JSON.parse) ${f.cpu.toFixed(2)} µs, ${f.wall.toFixed(0)} ms`].join("; "),
  );
  await sc.shutdown();
  await raw.close();
}

/** agentHandshake spawns the fault agent and runs initialize then session/new; ms from before the spawn. */
async function agentHandshake(cwd) {
  const t0 = performance.now();
  const child = spawn(faultBin, [], { cwd, stdio: ["pipe", "pipe", "ignore"] });
  const rl = createInterface({ input: child.stdout });
  const waiting = new Map();
  rl.on("line", (l) => {
    const m = JSON.parse(l);
    waiting.get(m.id)?.(m);
  });
  const ask = (id, method, params) =>
    new Promise((resolve, reject) => {
      waiting.set(id, (m) => (m.error ? reject(new Error(JSON.stringify(m.error))) : resolve(m.result)));
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  await ask(1, "initialize", { protocolVersion: 1, clientCapabilities: {} });
  await ask(2, "session/new", { cwd, mcpServers: [] });
  const d = performance.now() - t0;
  const closed = new Promise((r) => child.once("close", r));
  child.stdin.end();
  await closed;
  return d;
}

async function openToResult() {
  const sc = await spawnSidecar({ binary: sidecarBin, stateDir: tempDir() });
  const raw = new RawSidecar();
  await raw.call("initialize", { protocolVersion: 1, clientInfo: { name: "bench", version: "0" } });
  const cwd = tempDir();
  const agent = [], bare = [], viaClient = [];
  for (let i = 0; i < OPENS; i++) {
    agent.push(await agentHandshake(cwd));
    let t0 = performance.now();
    const { session } = await raw.call("session/open", openParams(`raw-${i}`, cwd, "normal"));
    bare.push(performance.now() - t0);
    await raw.call("session/close", { session });
    t0 = performance.now();
    const s = await sc.open(openParams(`client-${i}`, cwd, "normal"));
    viaClient.push(performance.now() - t0);
    await s.close();
  }
  const f = (xs) => `p50 ${percentile(xs, 50).toFixed(2)} ms p99 ${percentile(xs, 99).toFixed(2)} ms`;
  console.log(
    `Node host, session/open -> result, ${OPENS} opens each, interleaved (load ${loadAvg()}): the agent's own handshake spawned from Node ${f(agent)} ` +
      `(child_process.spawn costs more than the sidecar's launch: BenchmarkOpenToResult has the comparable one); ` +
      `sidecar open (bare) ${f(bare)}; through sidecar.open ${f(viaClient)}; the client's part p50 ${(percentile(viaClient, 50) - percentile(bare, 50)).toFixed(2)} ms`,
  );
  await sc.shutdown();
  await raw.close();
}

try {
  const which = process.argv[2] ?? "all";
  if (which === "all" || which === "turn") await floor(1);
  if (which === "all" || which === "flood") await floor(SESSIONS);
  if (which === "all" || which === "open") await openToResult();
} finally {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
