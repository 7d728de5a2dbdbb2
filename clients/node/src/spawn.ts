/**
 * spawnSidecar: starts one acpx-sidecar process with LSP framing, runs
 * `initialize`, and hands back its {@link Sidecar} (sidecar.ts). The
 * connection's reader routes session/update notifications to their turns
 * itself (reader.ts); everything else goes through vscode-jsonrpc.
 */

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import type { Writable } from "node:stream";
import { createMessageConnection, StreamMessageWriter, type Message } from "vscode-jsonrpc/node";

import { resolveBinary } from "./binary.js";
import { TappedWriter } from "./writer.js";
import { LspReader } from "./reader.js";
import { LocalDataCode, SidecarError, localError } from "./errors.js";
import type { ElicitationHandler } from "./elicitation.js";
import type { PermissionHandler } from "./permission.js";
import { serveExtRequests, type ExtSpawnOptions } from "./ext.js";
import { Sidecar, type ExitStatus } from "./sidecar.js";
import type { ElicitationCapabilities, InitializeResult, SessionUpdateParams } from "./types.js";

/** Options of {@link spawnSidecar}. */
export interface SpawnOptions extends ExtSpawnOptions {
  /** Absolute path of the executable; default `$ACPX_SIDECAR_BINARY`,
   * then the installed platform package (resolveBinary). */
  binary?: string;
  /** Absolute state directory, passed as `--state-dir` (records, the
   * ownership ledger: docs/protocol.md §6). Required. */
  stateDir: string;
  /** More flags (docs/protocol.md §2), after `--framing=lsp --state-dir DIR`.
   * `--framing` is this package's to set. */
  args?: string[];
  /** The sidecar's environment; default this process's. Providers do
   * not inherit it: they get only a minimal part of it (`PATH`, `HOME`,
   * `USER`, `LANG`, …: `--inherit-env minimal`, the default) plus the
   * `env` and `inheritEnv` of their session/open (docs/protocol.md §18). */
  env?: NodeJS.ProcessEnv;
  /** Answers the sidecar's permission requests. When given, initialize
   * declares `capabilities.permissionRequests` (docs/protocol.md §7) and
   * escalations reach it (a turn's own handler, Session.prompt, comes
   * first); a throw or a bad answer counts as `cancelled`. Without it,
   * escalations follow each session's `nonInteractivePermissions`. */
  onPermissionRequest?: PermissionHandler;
  /** Answers agents' elicitations (docs/protocol.md §22). When given,
   * initialize declares `capabilities.elicitation` (`elicitationModes`,
   * default both form and url) and agents are offered those modes; without
   * it agents are offered none. */
  onElicitation?: ElicitationHandler;
  /** The modes declared with onElicitation; default `{form: true, url: true}`. */
  elicitationModes?: ElicitationCapabilities;
  /** Where the sidecar's JSON log lines (stderr) go: "ignore", "inherit",
   * or a writable stream. By default they are drained and only their last
   * 4 KiB kept, for the message of a START_FAILED (the sidecar never logs
   * a secret, docs/protocol.md §13). */
  stderr?: "ignore" | "inherit" | Writable;
  /** clientInfo of initialize; default {name: "@acpx-sidecar/client", version}. */
  clientInfo?: { name: string; version: string };
  /** Aborting it during the start kills the sidecar (CANCELLED). */
  signal?: AbortSignal;
  /**
   * Called with every JSON-RPC message, in wire order: `"sent"` for those
   * this client writes (before the write), `"received"` for those it reads
   * (before they are dispatched). For tracing and tests. The messages are
   * the live objects: do not modify them. They hold the launch secrets of
   * session/open (`env`, docs/protocol.md §13): never log them unredacted.
   */
  onFrame?: (direction: "sent" | "received", message: Message) => void;
}


/** This package's version (package.json, stamped by `make npm-pack`), sent as clientInfo.version. */
const VERSION: string = createRequire(import.meta.url)("../package.json").version;


/**
 * spawnSidecar starts acpx-sidecar (`--framing=lsp --state-dir stateDir`
 * then `args`) and runs initialize (protocol version 1). Rejects with a
 * SidecarError: BINARY_NOT_FOUND, START_FAILED (bad options, the process
 * could not start or exited during initialize, e.g. status 2 for a bad
 * flag), CANCELLED, or the sidecar's own error. On failure the process is
 * killed and reaped.
 */
export async function spawnSidecar(opts: SpawnOptions): Promise<Sidecar> {
  if (!opts || opts.stateDir === undefined || opts.stateDir === "") {
    throw localError(LocalDataCode.START_FAILED, "stateDir is required (an absolute path: the sidecar's --state-dir)", "spawn");
  }
  if (typeof opts.stateDir !== "string" || !opts.stateDir.startsWith("/")) {
    throw localError(LocalDataCode.START_FAILED, "stateDir must be an absolute path", "spawn");
  }
  if ((opts.args ?? []).some((a) => a === "--framing" || a.startsWith("--framing="))) {
    throw localError(LocalDataCode.START_FAILED, "--framing is set by @acpx-sidecar/client (lsp)", "spawn");
  }
  const binary = resolveBinary(opts.binary, opts.env ?? process.env);
  const stderr = opts.stderr;
  const child = spawn(binary, ["--framing=lsp", "--state-dir", opts.stateDir, ...(opts.args ?? [])], {
    env: opts.env ?? process.env,
    stdio: ["pipe", "pipe", typeof stderr === "string" ? stderr : "pipe"],
  });
  const tail = new StderrTail();
  if (stderr === undefined) child.stderr?.on("data", (b: Buffer) => tail.add(b));
  else if (typeof stderr !== "string") child.stderr?.pipe(stderr, { end: false });
  // A write after the sidecar died gives EPIPE; the request fails instead.
  child.stdin?.on("error", () => undefined);

  const started = new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", (err) => reject(localError(LocalDataCode.START_FAILED, `${binary}: ${err.message}`, "spawn", err)));
  });
  const reader = new LspReader(child.stdout!, opts.onFrame);
  const writer = new TappedWriter(new StreamMessageWriter(child.stdin!), opts.onFrame, () => !child.stdin || child.stdin.destroyed || child.stdin.writableEnded);
  const conn = createMessageConnection(reader, writer, undefined, {
    messageStrategy: {
      handleMessage(m: Message, next: (m: Message) => void) {
        try {
          next(m);
        } finally {
          reader.dispatched(m);
        }
      },
    },
  });
  const processExit = new Promise<ExitStatus>((resolve) => {
    child.once("close", (code, signal) => resolve({ code, signal }));
  });
  // The process has ended and stdout is closed; frames still queued in the
  // connection are dispatched (one per event-loop turn) before pending
  // requests are failed (TRANSPORT), so no answer or update is lost
  // (updates the reader routed itself are delivered already).
  const exited = processExit.then(async (st) => {
    for (let i = 0; reader.busy && i < 1_000_000; i++) {
      await new Promise((r) => setImmediate(r));
    }
    conn.dispose();
    return st;
  });
  const sc = new Sidecar(child, conn, exited, opts.onPermissionRequest, writer, opts.onElicitation);
  if (opts.onExtRequest) serveExtRequests(conn, opts.onExtRequest, exited);
  reader.updates = (p) => sc.route(p as SessionUpdateParams);
  void sc.exited.then((st) => sc.emit("exit", st));
  conn.onError(() => undefined);
  conn.listen();
  try {
    await started;
    const info = await sc.request<InitializeResult>(
      "initialize",
      {
        protocolVersion: 1,
        clientInfo: opts.clientInfo ?? { name: "@acpx-sidecar/client", version: VERSION },
        capabilities: {
          permissionRequests: opts.onPermissionRequest !== undefined,
          extRequests: opts.onExtRequest !== undefined,
          ...(opts.onElicitation ? { elicitation: opts.elicitationModes ?? { form: true, url: true } } : {}),
        },
      },
      opts.signal,
    );
    (sc as { info: InitializeResult }).info = info;
    if (info?.serverInfo?.name !== "acpx-sidecar") {
      throw localError(LocalDataCode.START_FAILED, `${binary} answered initialize as ${JSON.stringify(info?.serverInfo?.name)}, not acpx-sidecar`, "initialize");
    }
    const max = info?.capabilities?.maxFrameBytes;
    if (typeof max === "number" && max > 0) writer.maxFrameBytes = max;
    if (opts.signal?.aborted) {
      throw localError(LocalDataCode.CANCELLED, "aborted during initialize", "initialize", opts.signal.reason);
    }
    return sc;
  } catch (err) {
    if (child.pid === undefined) throw err; // it never started: nothing to reap
    // An error response with a JSON-RPC code but no data.code (every
    // error of the sidecar has one) was answered by something else (found
    // by a fresh-user trial: cat echoed the client's own frames back).
    const rpcCode = (err as { cause?: { code?: unknown } } | undefined)?.cause?.code;
    const foreign = typeof rpcCode === "number" && rpcCode >= -32700 && rpcCode <= -32600;
    child.kill("SIGKILL");
    const st = await sc.exited;
    if (err instanceof SidecarError && err.dataCode === LocalDataCode.TRANSPORT) {
      const msg = foreign
        ? `${binary} did not answer initialize as acpx-sidecar: ${err.message}`
        : `the sidecar exited during initialize (status ${st.code ?? st.signal})` + tail.text();
      throw localError(LocalDataCode.START_FAILED, msg, "initialize", err);
    }
    throw err;
  }
}

/** StderrTail keeps the last 4 KiB of the sidecar's stderr. */
class StderrTail {
  private buf = Buffer.alloc(0);

  add(b: Buffer): void {
    this.buf = Buffer.concat([this.buf, b]);
    if (this.buf.length > 4096) this.buf = this.buf.subarray(this.buf.length - 4096);
  }

  /** "; the end of its stderr:\n…", or "" when it wrote nothing. */
  text(): string {
    const t = this.buf.toString("utf8").trimEnd();
    return t === "" ? "" : "; the end of its stderr:\n" + t;
  }
}
