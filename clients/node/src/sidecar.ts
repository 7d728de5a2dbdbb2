/**
 * Sidecar: one acpx-sidecar process and its JSON-RPC
 * connection (docs/protocol.md §3, §4), over vscode-jsonrpc with LSP
 * Content-Length framing (`--framing=lsp`). The sidecar's stdout is read
 * by LspReader (reader.ts), which routes session/update notifications to
 * their turns itself, ahead of vscode-jsonrpc's dispatch, in wire order.
 *
 * Lifetime: the sidecar never outlives its host. Its stdin is a pipe from
 * this process; when the host exits for any reason (even SIGKILL) the
 * kernel closes the pipe, and the sidecar treats stdin EOF as `shutdown`
 * followed by `exit` (docs/protocol.md §4 item 5): every session is
 * closed, every provider tree is ended and proven gone, then the sidecar
 * exits. It stays in the host's process group, so a terminal's Ctrl-C
 * (SIGINT) reaches it too and does the same. The orderly way is
 * {@link Sidecar.shutdown}, which returns the proofs.
 */

import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import {
  CancellationTokenSource,
  type CancellationToken,
  type MessageConnection,
} from "vscode-jsonrpc/node";

import type { TappedWriter } from "./writer.js";
import { LocalDataCode, SidecarError, localError, toSidecarError } from "./errors.js";
import { Session, type TurnSink } from "./session.js";
import { abortOnCancel, installElicitation, type ElicitationHandler } from "./elicitation.js";
import { askHandler, askKey, toolCallIdOf, type PermissionHandler } from "./permission.js";
import { LifecycleWatch } from "./lifecycle.js";

export type { PermissionHandler } from "./permission.js";
import type {
  CleanupProof,
  ElicitationCompleteNotification,
  ElicitationDecidedNotification,
  EventsParams,
  EventsResult,
  Exited,
  JournalNotice,
  InitializeResult,
  LifecycleNotice,
  LifecycleNoticeState,
  ListEntry,
  NetworkNotice,
  OpenParams,
  OpenResult,
  PermissionDecision,
  PermissionOutcome,
  PermissionRequest,
  SessionUpdateParams,
  StatsResult,
} from "./types.js";
import type { ExtNotice } from "./ext.js";

/** How the sidecar process ended. */
export interface ExitStatus {
  /** Exit status: 0 = shutdown with every proof complete, 1 otherwise,
   * 2 bad flags (docs/protocol.md §2); null when killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The events of a {@link Sidecar} and their arguments. */
export interface SidecarEvents {
  proof: [CleanupProof];
  exited: [Exited];
  update: [SessionUpdateParams];
  permission: [PermissionDecision];
  journal: [JournalNotice];
  lifecycle: [LifecycleNotice];
  network: [NetworkNotice];
  extNotification: [ExtNotice];
  elicitationDecided: [ElicitationDecidedNotification];
  elicitationComplete: [ElicitationCompleteNotification];
  /** A permission handler threw, rejected or answered in no known shape:
   * the agent was answered `cancelled` (never an approval) and this says
   * why, with the request. */
  handlerError: [HandlerError];
  exit: [ExitStatus];
}

/** The `"handlerError"` event: the request whose handler failed and the
 * error it threw (or a TypeError describing an answer of no known shape). */
export interface HandlerError {
  request: PermissionRequest;
  error: unknown;
}

/**
 * Sidecar is one running acpx-sidecar. Events (all in wire order):
 * - `"proof"` (CleanupProof): `cleanup/proof` notifications: provider-exit,
 *   late handshake, retained and recovered cleanups (docs/protocol.md §9),
 *   and a per-turn session's retires (origin `retire`, §24);
 * - `"exited"` (Exited): `session/exited`: one session's **provider** (the
 *   agent) died on its own; the sidecar keeps running;
 * - `"update"` (SessionUpdateParams): updates no running turn claims
 *   (requestId null, late updates of an earlier turn);
 * - `"permission"` (PermissionDecision): `session/permission` audits;
 * - `"elicitationDecided"`, `"elicitationComplete"`: the elicitation audits
 *   and an agent's finished url interaction (docs/protocol.md §22);
 * - `"journal"` (JournalNotice): `session/journal`: a session's journal or
 *   record stopped being written (`degraded`) or works again (`ok`, with the
 *   `gap` lost); updates keep flowing live meanwhile;
 * - `"lifecycle"` (LifecycleNotice): `session/lifecycle`: a per-turn (or
 *   idle-retired warm) session's tree retired (`parked`, with the retire's
 *   `proof`, which also comes as a `"proof"` event), is `reviving`, or is
 *   `live` again; `parked` with `error` after a failed revive
 *   (docs/protocol.md §24; Session.waitLifecycle waits for one state);
 * - `"network"` (NetworkNotice): `session/network`: one connection of a tree
 *   through its `sandbox.network.allow` list (`allowed`, when it ends, with
 *   its bytes) or one refused attempt (`denied`, at least once per
 *   destination per turn) (docs/protocol.md §19.1);
 * - `"extNotification"` (ExtNotice): `session/extNotification`: an agent's
 *   `_…` notification, params verbatim (docs/protocol.md §23);
 * - `"exit"` (ExitStatus): the **sidecar process** ended (after its stdout
 *   closed); the same moment as the {@link Sidecar.exited} promise.
 *
 * A running sidecar keeps the host's event loop alive (its pipes and the
 * child process are open handles): a host ends it with {@link shutdown}
 * (the proofs), {@link close} or {@link kill}, or the host never exits.
 *
 * Requests larger than `info.capabilities.maxFrameBytes` once encoded are
 * refused here without being sent (see {@link Sidecar.request}).
 */
export class Sidecar extends EventEmitter<SidecarEvents> {
  /** The initialize result: pid, containment, agents, bounds. */
  readonly info: InitializeResult;
  /** The sidecar's process id. */
  readonly pid: number;
  /** Resolves when the sidecar **process** has ended and its stdout is
   * drained (the `"exit"` event). Not to be confused with the `"exited"`
   * event, which is session/exited: one provider died. */
  readonly exited: Promise<ExitStatus>;

  /** @internal */
  readonly conn: MessageConnection;
  /** @internal turn sinks by session + "\0" + requestId */
  readonly turns = new Map<string, TurnSink>();
  private readonly child: ChildProcess;
  /** @internal route's cache: each session's running turn (requestId and sink) last routed to. */
  readonly routed = new Map<string, { requestId: string; sink: TurnSink }>();
  private readonly onPermission: PermissionHandler | undefined;
  /** @internal open permission asks: session\0requestId\0toolCallId → abort. */
  readonly asks = new Map<string, AbortController>();
  private readonly writer: TappedWriter | undefined;
  /** @internal each session's last session/lifecycle notice and its waits. */
  readonly lifecycles = new LifecycleWatch();
  private exitStatus: ExitStatus | undefined;
  private shutting: Promise<CleanupProof[]> | undefined;

  /** @internal use spawnSidecar (spawn.ts) */
  constructor(
    child: ChildProcess,
    conn: MessageConnection,
    exited: Promise<ExitStatus>,
    onPermission?: PermissionHandler,
    writer?: TappedWriter,
    onElicitation?: ElicitationHandler,
  ) {
    super();
    this.child = child;
    this.writer = writer;
    this.conn = conn;
    this.pid = child.pid ?? -1;
    this.exited = exited.then((st) => {
      this.exitStatus = st;
      this.settleAsks("", "the sidecar exited");
      this.lifecycles.exit("the sidecar exited");
      return st;
    });
    this.onPermission = onPermission;
    this.info = undefined as unknown as InitializeResult;
    conn.onNotification("session/update", (p: SessionUpdateParams) => this.route(p));
    conn.onNotification("session/permission", (p: PermissionDecision) => {
      if (p.decision !== "escalated" && p.rule !== "host") {
        this.asks.get(askKey(p.session, p.requestId, p.toolCallId))?.abort(new Error(`settled by the sidecar: ${p.decision}`));
      }
      this.emit("permission", p);
    });
    conn.onNotification("session/exited", (p: Exited) => {
      this.settleAsks(p.session + "\0", "the session's agent exited");
      this.lifecycles.end(p.session);
      this.emit("exited", p);
    });
    conn.onNotification("session/lifecycle", (p: LifecycleNotice) => {
      this.lifecycles.notice(p);
      this.emit("lifecycle", p);
    });
    conn.onNotification("cleanup/proof", (p: { proof: CleanupProof }) => void this.emit("proof", p.proof));
    conn.onNotification("session/journal", (p: JournalNotice) => void this.emit("journal", p));
    conn.onNotification("session/network", (p: NetworkNotice) => void this.emit("network", p));
    conn.onNotification("session/extNotification", (p: ExtNotice) => void this.emit("extNotification", p));
    conn.onRequest("session/requestPermission", (p: PermissionRequest, token) => this.answer(p, token));
    installElicitation(this, conn, onElicitation);
  }

  /** The exit status once the process has ended, else undefined. */
  get exitCode(): number | null | undefined {
    return this.exitStatus?.code;
  }

  /**
   * open runs session/open (docs/protocol.md §8) and returns the admitted
   * Session. Aborting `signal` during the open sends `$/cancelRequest`:
   * the open then fails with -32800 ADMISSION_ABORTED, `data.cleanup`,
   * and `cause` the signal's reason; a signal aborted before the call
   * rejects CANCELLED (code 0) with nothing sent. An abort asks the
   * sidecar to end the call; the call settles with its answer (a sidecar
   * that never answers holds it: kill it). Errors: SidecarError
   * (UNKNOWN_AGENT, COMMAND_NOT_EXECUTABLE, ACPX_SESSION_HANDSHAKE_TIMEOUT,
   * … with `proof` when something was launched). `lifecycle: "per-turn"`,
   * `reviveWaitMs`, `stateDirs` and `publish` are docs/protocol.md §24
   * (the README's "Per-turn sessions and the state store"); the result's
   * `lifecycle` is the mode and `restore` what the state store restored.
   */
  async open(params: OpenParams, opts: { signal?: AbortSignal } = {}): Promise<Session> {
    const res = await this.request<OpenResult>("session/open", params, opts.signal);
    return new Session(this, res);
  }

  /** list runs session/list: every admitted session, oldest first. */
  async list(): Promise<ListEntry[]> {
    const res = await this.request<{ sessions: ListEntry[] }>("session/list", {});
    return res.sessions;
  }

  /**
   * events runs session/events (docs/protocol.md §16): the journal entries
   * of `sessionKey` — by default every session of the key, those with an
   * entry number `n` greater than `afterN` (default 0); with `afterSeq` or
   * `session`, those of `session` (default the latest) with a greater
   * `seq` — oldest first, at most `limit` (1–10000, default 1000) of them,
   * with the `gaps` of the range and whether it is `complete`. Works for a
   * live, closed or dead session, and for a key whose sidecar died (read
   * from disk). Pass `nextN` as the next `afterN` until `events` is empty
   * ({@link eventPages} does that). Errors: -32602 INVALID_PARAMS (`field`
   * names the bad member), STORE_UNAVAILABLE.
   */
  async events(params: EventsParams): Promise<EventsResult> {
    return this.request<EventsResult>("session/events", params);
  }

  /**
   * eventPages pages through a key's journal with {@link events}: it
   * yields each non-empty page (with its `gaps`, `complete` and `truncated`
   * flags). By default it pages by `n` over every session of the key,
   * asking again with `afterN: nextN` until a page is empty; given
   * `afterSeq` or `session` it pages that session by `seq` (`afterSeq:
   * nextSeq`; a page never ends inside one `seq`'s entries). Nothing is
   * skipped or repeated (docs/protocol.md §16). Errors as for
   * {@link events}, thrown from the iteration.
   */
  async *eventPages(params: EventsParams): AsyncGenerator<EventsResult, void, undefined> {
    if (params.afterSeq !== undefined || params.session !== undefined) {
      let afterSeq = params.afterSeq ?? 0;
      for (;;) {
        const page = await this.events({ ...params, afterSeq });
        if (page.events.length === 0) return;
        yield page;
        afterSeq = page.nextSeq;
      }
    }
    let afterN = params.afterN ?? 0;
    for (;;) {
      const page = await this.events({ ...params, afterN });
      if (page.events.length === 0) return;
      yield page;
      afterN = page.nextN;
    }
  }

  /**
   * stats runs sidecar/stats (docs/protocol.md §17): sessions by state,
   * turn and proof counters, updates forwarded and close-to-proof
   * latency, since this sidecar started.
   */
  async stats(): Promise<StatsResult> {
    return this.request<StatsResult>("sidecar/stats", {});
  }

  /**
   * shutdown runs `shutdown` (every session closed, docs/protocol.md §7),
   * then sends `exit` and waits for the process to end. Returns the
   * proofs of that shutdown (sessions closed earlier are not repeated).
   * The exit status is then {@link exitCode} (0: every proof complete).
   * Idempotent, like Session.close: calls made while one runs, or after
   * it, get the same proofs (or the same rejection); the sidecar is asked
   * once (a second `shutdown` request would be refused SHUTTING_DOWN).
   */
  shutdown(): Promise<CleanupProof[]> {
    this.shutting ??= (async () => {
      const res = await this.request<{ proofs: CleanupProof[] }>("shutdown", {});
      this.lifecycles.end("");
      try {
        await this.conn.sendNotification("exit");
      } catch {
        // The sidecar may already be gone; exited settles either way.
      }
      await this.exited;
      return res.proofs;
    })();
    return this.shutting;
  }

  /**
   * kill sends a signal (default SIGTERM, which the sidecar handles like
   * shutdown + exit, docs/protocol.md §4) and waits for the process to end.
   * SIGKILL ends it at once; its guardians then end every provider tree
   * (docs/protocol.md §6), and the next sidecar on the same state dir
   * reports the leftovers as `recovered` proofs.
   */
  async kill(signal: NodeJS.Signals = "SIGTERM"): Promise<ExitStatus> {
    if (this.exitStatus === undefined) this.child.kill(signal);
    return this.exited;
  }

  /**
   * close runs {@link shutdown} (the same one: a shutdown already running
   * is waited for, and its proofs are what shutdown() returns), then ends
   * stdin and waits for the process to end. A shutdown that fails (the
   * sidecar died) does not fail close, which then only ends stdin (the
   * sidecar shuts down on EOF too, docs/protocol.md §4).
   */
  async close(): Promise<ExitStatus> {
    if (this.exitStatus === undefined) {
      try {
        await this.shutdown();
      } catch {
        // Its status is in exited; close only has to end the process.
      }
    }
    this.child.stdin?.end();
    return this.exited;
  }

  /** @internal lifecycleOf is the session's last session/lifecycle notice (SessionHost). */
  lifecycleOf(session: string): LifecycleNotice | undefined {
    return this.lifecycles.latest(session);
  }

  /** @internal waitLifecycle waits for the session's lifecycle state (SessionHost). */
  waitLifecycle(session: string, state: LifecycleNoticeState, signal?: AbortSignal): Promise<LifecycleNotice> {
    return this.lifecycles.wait(session, state, signal);
  }

  /** @internal endLifecycle forgets the session's lifecycle: it was closed (SessionHost). */
  endLifecycle(session: string): void {
    this.lifecycles.end(session);
  }

  /** @internal notify sends one host → sidecar notification (SessionHost). */
  notify(method: string, params: unknown): Promise<void> {
    return this.conn.sendNotification(method, params);
  }

  /**
   * @internal request sends one request and maps every failure to
   * SidecarError. A request whose encoded frame (the JSON-RPC message's
   * UTF-8 bytes, without the LSP header) is larger than the sidecar's
   * `info.capabilities.maxFrameBytes` is not sent: the sidecar would
   * answer it with id null (docs/protocol.md §3), so its answer could
   * never be matched and the call would never settle. It rejects at once
   * with SidecarError code -32600, dataCode INVALID_REQUEST, a message
   * naming both sizes, and `data: {code, retryable: false, frameBytes,
   * maxFrameBytes}`.
   */
  async request<R>(method: string, params: unknown, signal?: AbortSignal): Promise<R> {
    if (signal?.aborted) throw localError(LocalDataCode.CANCELLED, "aborted before it was sent", method, signal.reason);
    if (params === null || params === undefined) params = {};
    if (typeof params !== "object" || Array.isArray(params)) {
      // vscode-jsonrpc would send it wrapped in an array ([x]); the
      // protocol's params are objects (docs/protocol.md §4).
      throw new SidecarError(-32600, "INVALID_REQUEST", `${method}: params must be an object (got ${Array.isArray(params) ? "an array" : typeof params}); nothing was sent`, { method });
    }
    const cts = signal ? new CancellationTokenSource() : undefined;
    const onAbort = () => cts?.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    let refused: SidecarError | undefined;
    try {
      // vscode-jsonrpc writes the request synchronously inside sendRequest,
      // so a frame the writer refuses is known before the first await.
      if (this.writer) this.writer.refused = undefined;
      const p = cts ? this.conn.sendRequest<R>(method, params, cts.token) : this.conn.sendRequest<R>(method, params);
      refused = this.writer?.refused;
      if (this.writer) this.writer.refused = undefined;
      return await p;
    } catch (err) {
      if (refused) throw refused;
      const e = toSidecarError(err, method);
      if (e.dataCode === "SESSION_LOST") {
        // A revive could not resume the agent's session: it is closed
        // (docs/protocol.md §24).
        const session = (params as { session?: unknown }).session;
        if (typeof session === "string") this.lifecycles.end(session);
      }
      if (signal?.aborted && e.code !== 0) {
        // The sidecar's answer to the caller's abort: its cause is the
        // caller's reason, as the runtime port's (found by a fresh-user
        // trial: it was vscode-jsonrpc's ResponseError).
        throw new SidecarError(e.code, e.dataCode, e.message, { data: e.data, method, cause: signal.reason });
      }
      if (e.dataCode === LocalDataCode.TRANSPORT) {
        // A write to a dead sidecar fails before its exit is seen: give
        // the exit a moment to arrive, so the error can name it (found by
        // a fresh-user trial).
        if (this.exitStatus === undefined) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([this.exited, new Promise((r) => (timer = setTimeout(r, 500)))]);
          clearTimeout(timer);
        }
        const st = this.exitStatus;
        if (st !== undefined) {
          throw localError(LocalDataCode.TRANSPORT, `${method}: the sidecar exited (${st.code !== null ? `status ${st.code}` : `signal ${st.signal}`}) before answering`, method, err);
        }
      }
      throw e;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      cts?.dispose();
    }
  }

  /** @internal settleAsks aborts every open ask whose key starts with prefix. */
  settleAsks(prefix: string, why: string): void {
    for (const [k, ac] of this.asks) if (k.startsWith(prefix)) ac.abort(new Error(why));
  }

  /** @internal route hands one session/update to its turn, else to the "update" event. */
  route(p: SessionUpdateParams): void {
    let sink: TurnSink | undefined;
    if (p.requestId !== null && p.requestId !== undefined) {
      // Each session's running turn is cached by session id, which saves
      // building and hashing the turn key per update; a turn's sink ends
      // when it leaves `turns` (Session.prompt drops the entry then).
      const hit = this.routed.get(p.session);
      if (hit !== undefined && hit.requestId === p.requestId && !hit.sink.updates.isEnded) {
        sink = hit.sink;
      } else {
        sink = this.turns.get(p.session + "\0" + p.requestId);
        if (sink !== undefined) this.routed.set(p.session, { requestId: p.requestId, sink });
      }
    }
    if (sink) sink.updates.push(p);
    else this.emit("update", p);
  }

  /** @internal beginTurn routes turn key's updates and asks to sink (SessionHost); false when key has a running turn. */
  beginTurn(key: string, sink: TurnSink): boolean {
    if (this.turns.has(key)) return false;
    this.turns.set(key, sink);
    return true;
  }

  /** @internal endTurn stops routing to turn key of session and settles its open asks (SessionHost). */
  endTurn(session: string, key: string, sink: TurnSink): void {
    this.turns.delete(key);
    if (this.routed.get(session)?.sink === sink) this.routed.delete(session);
    this.settleAsks(key + "\0", "the turn ended");
  }

  private async answer(req: PermissionRequest, token?: CancellationToken): Promise<PermissionOutcome> {
    const sink = req.requestId === null ? undefined : this.turns.get(req.session + "\0" + req.requestId);
    const handler = sink?.onPermissionRequest ?? this.onPermission;
    if (!handler) return { outcome: "cancelled" };
    const key = askKey(req.session, req.requestId, toolCallIdOf(req));
    const ac = new AbortController();
    this.asks.set(key, ac);
    abortOnCancel(token, ac);
    try {
      return await askHandler(handler, req, ac.signal, (error) => this.emit("handlerError", { request: req, error }));
    } finally {
      if (this.asks.get(key) === ac) this.asks.delete(key);
    }
  }
}
