/**
 * Extension methods (docs/protocol.md §23): the agents' `_…` requests and
 * notifications reaching the host, and the wire types of the host's own
 * (Session.extRequest, extNotify, agentSessions).
 */

import { ResponseError, type MessageConnection } from "vscode-jsonrpc/node";

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
 * error, any other throw as -32603. `signal` aborts when the sidecar exits.
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
  conn.onRequest("session/extRequest", async (p: ExtRequest) => {
    try {
      const res = await handler(p, { signal });
      return res === undefined ? null : res;
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown; data?: unknown };
      if (typeof e?.code === "number") {
        return new ResponseError(e.code, typeof e.message === "string" ? e.message : "error", e.data);
      }
      return new ResponseError(-32603, err instanceof Error ? err.message : String(err));
    }
  });
}
