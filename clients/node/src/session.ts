/**
 * Session and Turn: one admitted sidecar session (docs/protocol.md §8) and
 * one prompt turn with its updates.
 */

import { LocalDataCode, SidecarError, localError } from "./errors.js";
import { UpdateQueue } from "./queue.js";
import type { PermissionHandler } from "./permission.js";
import type { AgentSessionsPage } from "./ext.js";
import type {
  CleanupProof,
  CloseInput,
  Identity,
  LifecycleNotice,
  LifecycleNoticeState,
  Models,
  Modes,
  SessionConfigOption,
  OpenResult,
  PromptInput,
  PromptResult,
  SessionUpdateParams,
  StatusResult,
} from "./types.js";

/** @internal where the connection delivers one turn's updates. */
export interface TurnSink {
  updates: UpdateQueue<SessionUpdateParams>;
  onPermissionRequest: PermissionHandler | undefined;
}

/** Options of {@link Session.prompt} beyond the wire params. */
export interface PromptOptions extends PromptInput {
  /** Answers this turn's permission requests (before the sidecar-wide one). */
  onPermissionRequest?: PermissionHandler;
  /** Aborting sends `$/cancelRequest` for the prompt: the turn then ends
   * with a normal `cancelled` result (docs/protocol.md §7). */
  signal?: AbortSignal;
}

/**
 * Turn is one running session/prompt.
 * - `updates`: the turn's `session/update` params (those carrying its
 *   requestId), in `seq` order, ending when the turn's answer arrives
 *   (docs/protocol.md §6: the answer follows every update the agent sent
 *   before it). It can be iterated once, at any time: nothing is lost.
 * - `updateBatches()`: the same updates as arrays, for hosts that handle
 *   them in bulk: each array non-empty, in `seq` order, holding every
 *   update that arrived since the previous one (one read of the
 *   sidecar's stdout, or more when the host is slower than the stream);
 *   the arrays are the caller's. Read the updates one way only: either
 *   `updates` or `updateBatches()`, once (a second reading throws a
 *   TypeError).
 * - `result`: the prompt result, a normal result however the turn ended
 *   (completed, cancelled, failed with `error.code`); it rejects only for
 *   request errors (TURN_ACTIVE, DUPLICATE_REQUEST_ID, SESSION_CLOSING,
 *   PROVIDER_PROCESS_LOST, SESSION_NOT_FOUND, TRANSPORT, and -32600
 *   INVALID_REQUEST for a prompt whose frame exceeds the sidecar's
 *   maxFrameBytes: refused here, not sent, its requestId left unused).
 */
export interface Turn {
  readonly requestId: string;
  readonly updates: AsyncIterable<SessionUpdateParams>;
  updateBatches(): AsyncIterable<SessionUpdateParams[]>;
  readonly result: Promise<PromptResult>;
  /** cancel runs session/cancel for this turn; true when it was the active turn. */
  cancel(): Promise<boolean>;
}

/**
 * @internal SessionHost is what a Session needs of its Sidecar (which
 * implements it), so session.ts does not import sidecar.ts: requests, and
 * the routing of a turn's updates and permission asks to its sink.
 */
export interface SessionHost {
  request<R>(method: string, params: unknown, signal?: AbortSignal): Promise<R>;
  /** Sends a host → sidecar notification. */
  notify(method: string, params: unknown): Promise<void>;
  /** Routes turn key's updates and asks to sink; false when key has a running turn. */
  beginTurn(key: string, sink: TurnSink): boolean;
  /** Stops routing to turn key of session and settles its open asks. */
  endTurn(session: string, key: string, sink: TurnSink): void;
  /** The session's last session/lifecycle notice. */
  lifecycleOf(session: string): LifecycleNotice | undefined;
  /** Waits for the session's lifecycle state (docs/protocol.md §24). */
  waitLifecycle(session: string, state: LifecycleNoticeState, signal?: AbortSignal): Promise<LifecycleNotice>;
  /** Forgets the session's lifecycle (closed); its waits reject SESSION_ENDED. */
  endLifecycle(session: string): void;
}

/** Session is one admitted session of a Sidecar. */
export class Session {
  /** The sidecar's session id (`s-…`). */
  readonly id: string;
  /** The host's sessionKey (the record id on disk). */
  readonly sessionKey: string;
  /** The session/open result (identity, agent, models, modes, process, permissionBinding). */
  readonly opened: OpenResult;
  private readonly sc: SessionHost;
  private ended = false;

  /** @internal made by Sidecar.open */
  constructor(sc: SessionHost, opened: OpenResult) {
    this.sc = sc;
    this.opened = opened;
    this.id = opened.session;
    this.sessionKey = opened.sessionKey;
  }

  /**
   * The last `session/lifecycle` notice read for this session
   * (docs/protocol.md §24), or undefined: a warm session, a per-turn one
   * before its first retire, or a closed one. When a turn's result has
   * resolved it holds every notice sent before that result (a revive's
   * `reviving` and `live`), not yet the retire that follows it.
   */
  get lifecycle(): LifecycleNotice | undefined {
    return this.sc.lifecycleOf(this.id);
  }

  /**
   * waitLifecycle resolves with the session's latest `session/lifecycle`
   * notice once it has `state`: at once when the latest one read has it,
   * else the first later one that has it. After a per-turn session's turn,
   * `await s.waitLifecycle("parked")` resolves once the retire has proven
   * the tree gone: its `proof` (origin `retire`; with a state store,
   * `proof.publication` says what was published). Rejects SESSION_ENDED
   * (code 0) when the session ends first (this close, its provider's
   * session/exited, SESSION_LOST, shutdown), or at once after this
   * session's close; TRANSPORT when the sidecar exited; CANCELLED when
   * `signal` aborts (`cause` its reason).
   */
  waitLifecycle(state: LifecycleNoticeState, opts: { signal?: AbortSignal } = {}): Promise<LifecycleNotice> {
    if (this.ended) {
      return Promise.reject(localError(LocalDataCode.SESSION_ENDED, `session ${this.id} was closed`, "session/lifecycle"));
    }
    return this.sc.waitLifecycle(this.id, state, opts.signal);
  }

  /** The identity admitted at open (docs/protocol.md §8). */
  get identity(): Identity {
    return this.opened.identity;
  }

  /**
   * prompt starts a turn (session/prompt, docs/protocol.md §8). It does not
   * wait: read `turn.updates` and await `turn.result`. A requestId that
   * already has a running turn in this client is refused at once
   * (DUPLICATE_REQUEST_ID, as the sidecar would).
   */
  prompt(p: PromptOptions): Turn {
    // A missing argument goes to the sidecar as empty params, which it
    // refuses -32602 naming the first member missing (a SidecarError).
    if (p === null || typeof p !== "object") p = {} as PromptOptions;
    const key = this.id + "\0" + p.requestId;
    const updates = new UpdateQueue<SessionUpdateParams>();
    const { onPermissionRequest, signal, ...wireParams } = p;
    const params = { ...wireParams, session: this.id };
    let result: Promise<PromptResult>;
    const sink = { updates, onPermissionRequest };
    if (!this.sc.beginTurn(key, sink)) {
      updates.end();
      result = Promise.reject(
        new SidecarError(-32000, "DUPLICATE_REQUEST_ID", `requestId ${JSON.stringify(p.requestId)} has a running turn`, {
          method: "session/prompt",
          data: { code: "DUPLICATE_REQUEST_ID", retryable: false },
        }),
      );
    } else {
      result = this.sc.request<PromptResult>("session/prompt", params, signal).finally(() => {
        this.sc.endTurn(this.id, key, sink);
        updates.end();
      });
    }
    // The caller may read only the updates; an unobserved rejection must
    // not end the host process. `result` still rejects for whoever awaits it.
    result.catch(() => undefined);
    return {
      requestId: p.requestId,
      updates,
      updateBatches: () => updates.batches(),
      result,
      cancel: () => this.cancel(p.requestId),
    };
  }

  /** cancel runs session/cancel (the active turn, or only the one with requestId). */
  async cancel(requestId?: string): Promise<boolean> {
    const params: Record<string, unknown> = { session: this.id };
    if (requestId !== undefined) params["requestId"] = requestId;
    const res = await this.sc.request<{ cancelled: boolean }>("session/cancel", params);
    return res.cancelled;
  }

  /** status runs session/status: the persisted record, checked against the identity. */
  status(): Promise<StatusResult> {
    return this.sc.request<StatusResult>("session/status", { session: this.id });
  }

  /** setModel selects and verifies a model (MODEL_UNAVAILABLE otherwise). */
  async setModel(model: string): Promise<Models> {
    const res = await this.sc.request<{ models: Models }>("session/setModel", { session: this.id, model });
    return res.models;
  }

  /** setMode selects and verifies a mode (MODE_UNAVAILABLE, PERMISSION_POLICY_UNENFORCEABLE). */
  async setMode(mode: string): Promise<Modes> {
    const res = await this.sc.request<{ modes: Modes }>("session/setMode", { session: this.id, mode });
    return res.modes;
  }

  /** setConfigOption sets an ACP config option (a string value id or a boolean) and verifies it. */
  async setConfigOption(key: string, value: string | boolean): Promise<SessionConfigOption[]> {
    const res = await this.sc.request<{ configOptions: SessionConfigOption[] }>("session/setConfigOption", {
      session: this.id,
      key,
      value,
    });
    return res.configOptions;
  }

  /**
   * extRequest sends the agent its `_…` extension request (session/extRequest,
   * docs/protocol.md §23) and resolves to the agent's result verbatim. A
   * method without the `_` prefix rejects -32602 (field `method`), nothing
   * sent; the agent's error rejects AGENT_ERROR (`data.agentError`).
   */
  async extRequest(method: string, params?: object): Promise<unknown> {
    const p: Record<string, unknown> = { session: this.id, method };
    if (params !== undefined) p["params"] = params;
    const res = await this.sc.request<{ result: unknown }>("session/extRequest", p);
    return res.result;
  }

  /** extNotify sends the agent its `_…` extension notification (session/extNotification). */
  async extNotify(method: string, params?: object): Promise<void> {
    const p: Record<string, unknown> = { session: this.id, method };
    if (params !== undefined) p["params"] = params;
    await this.sc.notify("session/extNotification", p);
  }

  /** agentSessions lists one page of the agent's own sessions (ACP session/list verbatim;
   * UNSUPPORTED_CONTROL without sessionCapabilities.list). Open one with `agentSessionId`. */
  agentSessions(p: { cwd?: string; cursor?: string } = {}): Promise<AgentSessionsPage> {
    return this.sc.request<AgentSessionsPage>("session/agentSessions", { ...p, session: this.id });
  }

  /**
   * close runs session/close (docs/protocol.md §8) and returns the cleanup
   * proof, `complete: true`. A tree that could not be proven gone rejects
   * with CLEANUP_INCOMPLETE whose `proof` is the proof so far; the final
   * one then comes as a Sidecar `"proof"` event. Idempotent: a second close
   * returns the same proof.
   */
  async close(p: CloseInput = {}): Promise<CleanupProof> {
    const params: Record<string, unknown> = { session: this.id };
    if (p.reason !== undefined) params["reason"] = p.reason;
    if (p.discardPersistentState !== undefined) params["discardPersistentState"] = p.discardPersistentState;
    let res: { proof: CleanupProof };
    try {
      res = await this.sc.request<{ proof: CleanupProof }>("session/close", params);
    } catch (err) {
      if (err instanceof SidecarError && err.dataCode === "CLEANUP_INCOMPLETE") this.endLifecycle();
      throw err;
    }
    this.endLifecycle();
    if (!res || typeof res.proof !== "object") {
      throw localError(LocalDataCode.BAD_RESULT, "session/close answered without a proof", "session/close");
    }
    return res.proof;
  }

  private endLifecycle(): void {
    this.ended = true;
    this.sc.endLifecycle(this.id);
  }
}
