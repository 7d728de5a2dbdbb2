/**
 * Extension methods (docs/protocol.md §23): the agents' `_…` requests and
 * notifications reaching the host, and the wire types of the host's own
 * (Session.extRequest, extNotify, agentSessions).
 */

import { ResponseError, type CancellationToken, type MessageConnection } from "vscode-jsonrpc/node";

import { abortOnCancel } from "./elicitation.js";

import type * as wire from "./protocol.gen.js";

/** An agent's `_…` request as the host gets it (session/extRequest):
 * `requestId` is the active turn's (null outside a turn), `params` the
 * agent's verbatim. */
export interface ExtRequest {
  session: string;
  requestId: string | null;
  method: string;
  params?: unknown;
}

/** An agent's `_…` notification (session/extNotification), params verbatim. */
export type ExtNotice = wire.ExtNotificationNotification;

/** One page of the agent's own sessions: its ACP session/list result verbatim. */
export type AgentSessionsPage = wire.AgentSessionsResult;

/**
 * Answers an agent's `_…` request. What it returns (or resolves to) is sent
 * to the agent verbatim; a throw of `{code, message, data?}` (a
 * SidecarError or any object with a numeric `code`) is sent as that JSON-RPC
 * error, any other throw as -32603. `signal` aborts when the sidecar exits
 * or sends `$/cancelRequest` for the request (the agent withdrew it, its
 * bound ran out, the turn or session ended: docs/protocol.md §22); an
 * answer after that is ignored.
 */
export type ExtRequestHandler = (req: ExtRequest, ctx: { signal: AbortSignal }) => unknown;

/** The options of spawnSidecar for extension methods. */
export interface ExtSpawnOptions {
  /** Answers the agents' `_…` extension requests (docs/protocol.md §23).
   * When given, initialize declares `capabilities.extRequests`; without
   * it the agents get -32601. The `"extNotification"` event carries their
   * `_…` notifications either way. */
  onExtRequest?: ExtRequestHandler;
}

/** @internal registers the session/extRequest handler on conn; its signal
 * aborts once `exited` settles. */
export function serveExtRequests(conn: MessageConnection, handler: ExtRequestHandler, exited: Promise<unknown>): void {
  const gone = new AbortController();
  void exited.then(() => gone.abort(new Error("the sidecar exited")));
  const signal = gone.signal;
  conn.onRequest("session/extRequest", async (p: ExtRequest, token: CancellationToken) => {
    // The handler's signal aborts when the sidecar exits or sends
    // $/cancelRequest for it (the agent withdrew it, a bound ran out, the
    // turn or session ended: docs/protocol.md §22), as for permissions.
    const ac = new AbortController();
    const onGone = () => ac.abort(signal.reason);
    if (signal.aborted) onGone();
    else signal.addEventListener("abort", onGone, { once: true });
    abortOnCancel(token, ac);
    try {
      const res = await handler(p, { signal: ac.signal });
      return res === undefined ? null : res;
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown; data?: unknown };
      if (typeof e?.code === "number") {
        return new ResponseError(e.code, typeof e.message === "string" ? e.message : "error", e.data);
      }
      return new ResponseError(-32603, err instanceof Error ? err.message : String(err));
    } finally {
      signal.removeEventListener("abort", onGone);
    }
  });
}
