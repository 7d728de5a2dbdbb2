/**
 * Elicitation (docs/protocol.md §22): an agent's ACP elicitation/create
 * reaches the host as session/elicitation; the host answers accept (with
 * the form's content), decline or cancel. Withdrawn requests: the
 * sidecar's `$/cancelRequest` for a request the agent withdrew aborts
 * that request's handler signal (vscode-jsonrpc's cancellation token).
 */

import type { CancellationToken, MessageConnection } from "vscode-jsonrpc/node";

import type { ElicitationContentValue, ElicitationParams, ElicitationResult } from "./types.js";

/** The params of a session/elicitation request. */
export type ElicitationRequest = ElicitationParams;
/** The host's answer to session/elicitation (ACP CreateElicitationResponse). */
export type ElicitationResponse = ElicitationResult;

/**
 * Answers one session/elicitation. `signal` aborts when the sidecar no
 * longer waits for the answer: the agent withdrew the request (the
 * sidecar's `$/cancelRequest`, also sent when its `elicitationTimeoutMs`
 * ran out), the turn ended, the session's agent exited, or the sidecar
 * exited. An answer after that is
 * ignored. A throw or a bad answer counts as `cancel`.
 */
export type ElicitationHandler = (
  req: ElicitationRequest,
  ctx: { signal: AbortSignal },
) => ElicitationResponse | Promise<ElicitationResponse>;

/** accept answers with the form's values (none for a url elicitation: the user consented to open it). */
export function accept(content?: Record<string, ElicitationContentValue>): ElicitationResponse {
  return content === undefined ? { action: "accept" } : { action: "accept", content };
}

/** decline answers `decline`: the user said no. */
export function decline(): ElicitationResponse {
  return { action: "decline" };
}

/** cancelElicitation answers `cancel`: dismissed without a choice. */
export function cancelElicitation(): ElicitationResponse {
  return { action: "cancel" };
}

/** What the elicitation plumbing needs of a Sidecar. */
interface AskHost {
  readonly asks: Map<string, AbortController>;
  emit(event: "elicitationDecided" | "elicitationComplete", arg: never): boolean;
}

let nextAsk = 0;

/** elicitPrefix is the asks-map prefix of a turn's elicitations. */
function elicitPrefix(session: string, requestId: string | null | undefined): string {
  return session + "\0" + (requestId ?? "") + "\0\0elicitation\0";
}

/**
 * abortOnCancel aborts ac when the sidecar cancels the request (its
 * `$/cancelRequest`: the agent withdrew it, its bound ran out, the turn
 * or session ended; docs/protocol.md §22).
 * @internal
 */
export function abortOnCancel(token: CancellationToken | undefined, ac: AbortController): void {
  const why = () => new Error("cancelled by the sidecar ($/cancelRequest: withdrawn by the agent, its bound ran out, or the turn ended)");
  if (token?.isCancellationRequested) ac.abort(why());
  token?.onCancellationRequested(() => ac.abort(why()));
}

/**
 * installElicitation answers session/elicitation with handler (cancel
 * without one) and emits the `"elicitationDecided"` and
 * `"elicitationComplete"` events.
 * @internal
 */
export function installElicitation(sc: AskHost, conn: MessageConnection, handler: ElicitationHandler | undefined): void {
  conn.onNotification("session/elicitationDecided", (p: { session: string; requestId: string | null; rule: string }) => {
    // A decision ends its handler through the sidecar's $/cancelRequest
    // of that very request (by id), which follows an elicitationTimeoutMs
    // decision at once: the notice names no request, and elicitations of
    // one turn may reach the host in another order than their bounds run
    // out (aborting "the oldest" ended the wrong one's handler).
    sc.emit("elicitationDecided", p as never);
  });
  conn.onNotification("session/elicitationComplete", (p: unknown) => void sc.emit("elicitationComplete", p as never));
  conn.onRequest("session/elicitation", async (req: ElicitationRequest, token: CancellationToken) => {
    if (!handler) return cancelElicitation();
    const key = elicitPrefix(req.session, req.requestId) + nextAsk++;
    const ac = new AbortController();
    sc.asks.set(key, ac);
    abortOnCancel(token, ac);
    const settled = new Promise<undefined>((resolve) =>
      ac.signal.addEventListener("abort", () => resolve(undefined), { once: true }),
    );
    try {
      const out = await Promise.race([Promise.resolve(handler(req, { signal: ac.signal })), settled]);
      if (out && (out.action === "accept" || out.action === "decline" || out.action === "cancel")) {
        return out.action === "accept" && out.content ? { action: "accept", content: out.content } : { action: out.action };
      }
    } catch {
      // A failing handler answers nothing: cancel.
    } finally {
      sc.asks.delete(key);
    }
    return cancelElicitation();
  });
}
