/**
 * openAcpxRuntimePort: the runtime "port" a Paperclip-style host drives
 * (identity, getStatus, setModel, startTurn with events and a result,
 * close), served by acpx-sidecar instead of an in-process ACP runtime, so
 * such a host can swap runtimes. The event and result shapes are those of
 * acpx's runtime (`AcpRuntimeEvent`, `AcpRuntimeTurnResult`); the
 * containment, permission policy and cleanup proofs are the sidecar's
 * (docs/protocol.md).
 */

import { LocalDataCode, SidecarError, localError } from "./errors.js";
import { toEvent, toResult, type AcpxRuntimeEvent, type AcpxRuntimeTurnResult } from "./runtime-events.js";
import type { Session, Turn } from "./session.js";
import type { PermissionHandler, Sidecar } from "./sidecar.js";
import { spawnSidecar, type SpawnOptions } from "./spawn.js";
import type {
  CleanupProof,
  Command,
  Identity,
  JournalNotice,
  Models,
  OpenParams,
  StatusResult,
  Usage,
} from "./types.js";

export type { AcpxRuntimeEvent, AcpxRuntimeTurnResult } from "./runtime-events.js";

/** Options of {@link openAcpxRuntimePort}. */
export interface AcpxRuntimePortOptions {
  /** A running sidecar to open the session on. Without it the port spawns
   * its own (from `spawn`) and shuts it down in close(). */
  sidecar?: Sidecar;
  /** How to spawn the port's own sidecar (ignored with `sidecar`). Its
   * permission requests go to the turn's handler, else `onPermissionRequest`. */
  spawn?: Omit<SpawnOptions, "onPermissionRequest">;
  /** Sidecar agent profile (`codex`, `claude`, …; docs/agents.md). */
  agent: string;
  /** The one executable the session may launch (absolute path, args, sha256). */
  command: Command;
  /** Workspace directory (absolute). */
  cwd: string;
  /** The session's state directory (records); default the sidecar's. */
  stateDirectory?: string;
  /** The host's stable key of the conversation (the record id). */
  providerSessionKey: string;
  /** Launch environment (secret). Entries whose value is undefined are left out. */
  launchEnvironment?: Record<string, string | undefined>;
  /** Appended system prompt (ACP `_meta.systemPrompt.append` on session/new). */
  systemInstructions?: string;
  /** Model to select and verify at open. */
  model?: string;
  /** Mode to select and verify at open. */
  mode?: string;
  /** approve-all | approve-reads (the sidecar's default) | deny-all (docs/protocol.md §10). */
  permissionMode?: OpenParams["permissionMode"];
  /** autoApprove/autoDeny/escalate ToolKinds and a defaultAction, checked before permissionMode (§10). */
  permissionPolicy?: OpenParams["permissionPolicy"];
  /** What an escalation does when no host handler is declared: deny (default) | fail. */
  nonInteractivePermissions?: OpenParams["nonInteractivePermissions"];
  /** Admission bound, ms (docs/protocol.md §8). */
  handshakeTimeoutMs?: number;
  /** Resume the key's record when there is one (default true). */
  resume?: boolean;
  /** Default answer to permission requests of this port's turns. */
  onPermissionRequest?: PermissionHandler;
  /** Aborting it cancels the admission: the open rejects -32800
   * ADMISSION_ABORTED whose `cause` is `signal.reason`, nothing left; a
   * signal aborted already spawns and sends nothing. */
  signal?: AbortSignal;
  /** Receives this session's `session/journal` notices: its journal or
   * record stopped being written (`degraded`) or works again (`ok`, with
   * the `gap` lost); turns keep running meanwhile (docs/protocol.md §16). */
  onJournalNotice?: (notice: JournalNotice) => void;
  /** The kernel sandbox of the session's tree, as `session/open`'s
   * `sandbox` (docs/protocol.md §19): e.g. `{ network: { allow:
   * ["api.openai.com:443"] } }` for egress by name (§19.1). */
  sandbox?: OpenParams["sandbox"];
  /** Resource limits of the tree, as `session/open`'s `limits` (§18.2;
   * `connections` with an allow list). */
  limits?: OpenParams["limits"];
  /** `warm` (default), `per-turn` or `{ mode, idleRetireMs }`, as
   * `session/open`'s `lifecycle` (§24). */
  lifecycle?: OpenParams["lifecycle"];
}

/** The members {@link AcpxRuntimePortOptions} has: any other is refused,
 * as the sidecar refuses an unknown member of `session/open` (a misspelt
 * or unsupported option must not leave, say, the network open). */
const portOptionNames = new Set([
  "sidecar", "spawn", "agent", "command", "cwd", "stateDirectory", "providerSessionKey", "launchEnvironment",
  "systemInstructions", "model", "mode", "permissionMode", "permissionPolicy", "nonInteractivePermissions",
  "handshakeTimeoutMs", "resume", "onPermissionRequest", "signal", "onJournalNotice", "sandbox", "limits", "lifecycle",
]);

/** Input of {@link AcpxRuntimePort.startTurn}. */
export interface AcpxRuntimeTurnInput {
  text: string;
  requestId: string;
  /** Aborting it cancels the turn (its result is then `cancelled`). */
  signal?: AbortSignal;
  /** Answers this turn's permission requests. */
  onPermissionRequest?: PermissionHandler;
  /** Turn bound in ms (TURN_TIMEOUT). */
  timeoutMs?: number;
  /** true: when a turn is running, wait behind it (session/prompt
   * `queue`, docs/protocol.md §8 Queued turns) instead of being refused
   * TURN_ACTIVE. Default false. */
  queue?: boolean;
}

/**
 * One turn of the port. `events` end before `result` settles.
 *
 * A turn the sidecar **refuses** (TURN_ACTIVE, DUPLICATE_REQUEST_ID,
 * SESSION_CLOSING, PROVIDER_PROCESS_LOST, SESSION_NOT_FOUND, a request over
 * maxFrameBytes, TRANSPORT; docs/protocol.md §8) never ran: `promptStarted`
 * and `result` both **reject** with that SidecarError and `events` end
 * empty. A turn that was accepted always **resolves** `result`, however it
 * ended (`failed` with `error.code`, e.g. PROVIDER_PROCESS_LOST,
 * TURN_TIMEOUT).
 */
export interface AcpxRuntimeTurn {
  readonly requestId: string;
  /**
   * Resolves once the sidecar has accepted the turn: it is running, or
   * queued behind the running one (`queue: true`). Rejects with the
   * refusal (the same SidecarError `result` rejects with). The port
   * learns it from a session/status it sends behind the prompt (requests
   * run in wire order, docs/protocol.md §4), the first time this member is
   * read, or from the prompt's answer when that comes first.
   */
  readonly promptStarted: Promise<void>;
  readonly events: AsyncIterable<AcpxRuntimeEvent>;
  /** The turn's result; rejects only when the turn was refused (above). */
  readonly result: Promise<AcpxRuntimeTurnResult>;
  cancel(input?: { reason?: string }): Promise<void>;
  /** closeStream stops the event stream; the turn keeps running. */
  closeStream(input?: { reason?: string }): Promise<void>;
}

/** Status as acpx's runtime reports it, from session/status. */
export interface AcpxRuntimeStatus {
  lastRequestId?: string;
  summary: string;
  acpxRecordId: string;
  backendSessionId: string;
  agentSessionId: string;
  models?: Models;
  usage?: {
    cumulative?: Usage;
    perRequest?: Record<string, Usage>;
    cost?: { amount: number; currency: string; basis: string };
  };
  /** session, state, closed, process, queuedRequestIds (turns waiting
   * behind the running one), modes, permissionBinding of session/status. */
  details: Record<string, unknown>;
  /** Whether the session's journal and record are being written
   * (session/status `persistence`, docs/protocol.md §16). */
  persistence?: StatusResult["persistence"];
}

/**
 * The port. After close() was called (and unless it rejected),
 * getStatus, setModel and startTurn fail with SidecarError -32000
 * SESSION_CLOSING without asking the sidecar (the port's own sidecar is
 * gone by then); identity() and close() keep answering.
 */
export interface AcpxRuntimePort {
  identity(): Promise<Identity>;
  getStatus(): Promise<AcpxRuntimeStatus>;
  setModel(model: string): Promise<void>;
  startTurn(input: AcpxRuntimeTurnInput): AcpxRuntimeTurn;
  /** Closes the session (state kept unless discardPersistentState) and
   * returns its complete cleanup proof; a port that spawned its sidecar
   * then shuts it down. Idempotent once it succeeded; after a rejection
   * (CLEANUP_INCOMPLETE with the proof so far) it may be called again. */
  close(input: { reason: string; discardPersistentState?: boolean }): Promise<CleanupProof>;
  /** The sidecar session under the port. */
  readonly session: Session;
}

/**
 * openAcpxRuntimePort opens one session through the sidecar and returns
 * the port. Rejects with SidecarError: the open's errors (with `proof`
 * when something was launched), ACPX_IDENTITY_INVALID when the identity
 * lacks an id (the session is then closed with reason "identity
 * validation failed" first), or the spawn's errors.
 */
export async function openAcpxRuntimePort(options: AcpxRuntimePortOptions): Promise<AcpxRuntimePort> {
  for (const name of Object.keys(options)) {
    if (!portOptionNames.has(name)) {
      throw new SidecarError(-32602, "INVALID_PARAMS", `openAcpxRuntimePort: unknown option "${name}"`, {
        method: "openAcpxRuntimePort",
        data: { code: "INVALID_PARAMS", retryable: false, field: name },
      });
    }
  }
  const signal = options.signal;
  // A signal aborted already: nothing is spawned, nothing sent.
  if (signal?.aborted) throw admissionAborted(signal, "the open was aborted before anything was started");
  let owned: Sidecar | undefined;
  let sc = options.sidecar;
  if (!sc) {
    if (!options.spawn) throw localError(LocalDataCode.START_FAILED, "give sidecar or spawn", "openAcpxRuntimePort");
    const fallback = options.onPermissionRequest;
    try {
      owned = await spawnSidecar({
        ...options.spawn,
        // Declared so that each turn's handler can answer; none → cancelled.
        onPermissionRequest: fallback ?? (() => ({ outcome: "cancelled" })),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted) throw admissionAborted(signal, "the open was aborted while the sidecar started", err);
      throw err;
    }
    sc = owned;
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.launchEnvironment ?? {})) if (v !== undefined) env[k] = v;
  const params: OpenParams = {
    sessionKey: options.providerSessionKey,
    agent: options.agent,
    command: options.command,
    cwd: options.cwd,
    env,
  };
  if (options.stateDirectory !== undefined) params.stateDir = options.stateDirectory;
  if (options.systemInstructions !== undefined) params.systemPrompt = options.systemInstructions;
  if (options.model !== undefined) params.model = options.model;
  if (options.mode !== undefined) params.mode = options.mode;
  if (options.permissionMode !== undefined) params.permissionMode = options.permissionMode;
  if (options.permissionPolicy !== undefined) params.permissionPolicy = options.permissionPolicy;
  if (options.nonInteractivePermissions !== undefined) params.nonInteractivePermissions = options.nonInteractivePermissions;
  if (options.handshakeTimeoutMs !== undefined) params.handshakeTimeoutMs = options.handshakeTimeoutMs;
  if (options.resume !== undefined) params.resume = options.resume;
  if (options.sandbox !== undefined) params.sandbox = options.sandbox;
  if (options.limits !== undefined) params.limits = options.limits;
  if (options.lifecycle !== undefined) params.lifecycle = options.lifecycle;

  let session: Session;
  try {
    session = await sc.open(params, signal ? { signal } : {});
  } catch (err) {
    if (owned) await owned.shutdown().catch(() => undefined);
    if (signal?.aborted) throw admissionAborted(signal, "the open was aborted during its handshake", err);
    throw err;
  }
  const id = session.identity;
  if (!id || !id.acpxRecordId || !id.backendSessionId || !id.agentSessionId) {
    await session.close({ reason: "identity validation failed" }).catch(() => undefined);
    if (owned) await owned.shutdown().catch(() => undefined);
    throw new SidecarError(-32000, "ACPX_IDENTITY_INVALID", "the sidecar session has an incomplete identity", {
      method: "session/open",
    });
  }
  const onJournal = options.onJournalNotice;
  if (onJournal) {
    sc.on("journal", (n: JournalNotice) => {
      if (n.session === session.id) onJournal(n);
    });
  }
  return new Port(session, owned, options.onPermissionRequest);
}

/**
 * admissionAborted is the port's rejection of an open its caller's signal
 * aborted: -32800 `ADMISSION_ABORTED` whose `cause` is the caller's exact
 * abort reason (`signal.reason`), keeping the sidecar's `data` (the
 * cleanup proof of what was launched) when the error of the call had it.
 */
function admissionAborted(signal: AbortSignal, message: string, err?: unknown): SidecarError {
  const data = (err instanceof SidecarError ? err.data : undefined) ?? { code: "ADMISSION_ABORTED", retryable: false };
  return new SidecarError(-32800, "ADMISSION_ABORTED", message, {
    method: "session/open",
    cause: signal.reason,
    data,
  });
}

class Port implements AcpxRuntimePort {
  private closing: Promise<CleanupProof> | undefined;
  private closeCalled = false;

  constructor(
    readonly session: Session,
    private readonly owned: Sidecar | undefined,
    private readonly onPermission: PermissionHandler | undefined,
  ) {}

  async identity(): Promise<Identity> {
    return structuredClone(this.session.identity);
  }

  /** closedError is the SESSION_CLOSING refusal once close() was called (and has not failed), else undefined. */
  private closedError(method: string): SidecarError | undefined {
    if (!this.closeCalled) return undefined;
    return new SidecarError(-32000, "SESSION_CLOSING", `the runtime port was closed (session ${this.session.id})`, {
      method,
      data: { code: "SESSION_CLOSING", retryable: false },
    });
  }

  async getStatus(): Promise<AcpxRuntimeStatus> {
    const closed = this.closedError("session/status");
    if (closed) throw closed;
    const st = await this.session.status();
    const out: AcpxRuntimeStatus = {
      summary: st.summary,
      acpxRecordId: st.identity.acpxRecordId,
      backendSessionId: st.identity.backendSessionId,
      agentSessionId: st.identity.agentSessionId,
      details: {
        session: st.session,
        state: st.state,
        closed: st.closed,
        process: st.process,
        ...(st.queuedRequestIds ? { queuedRequestIds: st.queuedRequestIds } : {}),
        ...(st.modes ? { modes: st.modes } : {}),
        ...(st.permissionBinding ? { permissionBinding: st.permissionBinding } : {}),
      },
    };
    if (st.lastRequestId !== null) out.lastRequestId = st.lastRequestId;
    if (st.models) out.models = st.models;
    if (st.persistence) out.persistence = st.persistence;
    if (st.usage || st.cost) {
      out.usage = { ...(st.usage ?? {}), ...(st.cost ? { cost: st.cost } : {}) };
    }
    return out;
  }

  async setModel(model: string): Promise<void> {
    const closed = this.closedError("session/setModel");
    if (closed) throw closed;
    const models = await this.session.setModel(model);
    if (models.currentModelId !== model) {
      throw localError(
        LocalDataCode.BAD_RESULT,
        `setModel ${JSON.stringify(model)}: the sidecar reports ${JSON.stringify(models.currentModelId)}`,
        "session/setModel",
      );
    }
  }

  startTurn(input: AcpxRuntimeTurnInput): AcpxRuntimeTurn {
    const closed = this.closedError("session/prompt");
    if (closed) return refusedTurn(input.requestId, closed);
    const handler = input.onPermissionRequest ?? this.onPermission;
    const turn: Turn = this.session.prompt({
      requestId: input.requestId,
      prompt: input.text,
      ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
      ...(input.queue !== undefined ? { queue: input.queue } : {}),
      ...(input.signal ? { signal: input.signal } : {}),
      ...(handler ? { onPermissionRequest: handler } : {}),
    });
    let streamClosed = false;
    const iterator = turn.updates[Symbol.asyncIterator]();
    const events = (async function* (): AsyncGenerator<AcpxRuntimeEvent> {
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done || streamClosed) return;
          const ev = toEvent(next.value);
          if (ev) yield ev;
        }
      } finally {
        await iterator.return?.();
      }
    })();
    const result = turn.result.then(toResult);
    result.catch(() => undefined);
    // Whether the prompt's answer has come (a refusal is answered before
    // any later request of the session: docs/protocol.md §4).
    let answered = false;
    const settled = turn.result.then(
      () => void (answered = true),
      () => void (answered = true),
    );
    let started: Promise<void> | undefined;
    const session = this.session;
    const promptStarted = (): Promise<void> => {
      started ??= (async () => {
        const probe = session.status().then(
          () => true,
          () => false,
        );
        // Whichever comes first: the prompt's answer, or the answer to a
        // session/status sent after it (then the prompt was accepted,
        // unless its own answer, which precedes it on the wire, refused it).
        await Promise.race([settled, probe]);
        await new Promise((r) => setImmediate(r));
        if (!answered && (await probe)) return;
        await turn.result; // rejects with the refusal; resolves for an accepted turn
      })();
      started.catch(() => undefined);
      return started;
    };
    return {
      requestId: input.requestId,
      get promptStarted() {
        return promptStarted();
      },
      events,
      result,
      cancel: async () => {
        await turn.cancel();
      },
      closeStream: async () => {
        streamClosed = true;
        await iterator.return?.();
      },
    };
  }

  close(input: { reason: string; discardPersistentState?: boolean }): Promise<CleanupProof> {
    this.closeCalled = true;
    this.closing ??= (async () => {
      const proof = await this.session.close({
        reason: input.reason,
        discardPersistentState: input.discardPersistentState ?? false,
      });
      if (this.owned) await this.owned.shutdown();
      return proof;
    })();
    // A failed close (CLEANUP_INCOMPLETE: the sidecar keeps retrying) can be
    // asked again; a successful one is answered from memory.
    this.closing.catch(() => {
      this.closing = undefined;
      this.closeCalled = false;
    });
    return this.closing;
  }
}

/** refusedTurn is a turn refused before it was sent: both promises reject with err. */
function refusedTurn(requestId: string, err: SidecarError): AcpxRuntimeTurn {
  const rejected = Promise.reject(err);
  rejected.catch(() => undefined);
  return {
    requestId,
    promptStarted: rejected as Promise<never>,
    events: (async function* (): AsyncGenerator<AcpxRuntimeEvent> {})(),
    result: rejected as Promise<never>,
    cancel: async () => undefined,
    closeStream: async () => undefined,
  };
}
