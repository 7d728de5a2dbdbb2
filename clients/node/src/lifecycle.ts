/**
 * LifecycleWatch: what a Sidecar last read of each session's lifecycle
 * (session/lifecycle, docs/protocol.md §24), for Session.lifecycle and
 * Session.waitLifecycle. A per-turn session's tree retires after every
 * turn (`parked`, with the retire's proof) and revives on the next call
 * that needs the agent (`reviving`, then `live`). The Sidecar records
 * every notice as it dispatches it, in wire order, before any response
 * read after it settles its caller.
 */

import { LocalDataCode, SidecarError, localError } from "./errors.js";
import type { LifecycleNotice, LifecycleNoticeState } from "./types.js";

interface Waiter {
  state: LifecycleNoticeState;
  resolve: (n: LifecycleNotice) => void;
  reject: (e: SidecarError) => void;
}

const METHOD = "session/lifecycle";

/** @internal */
export class LifecycleWatch {
  private readonly last = new Map<string, LifecycleNotice>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private gone: string | undefined;

  /** notice records n and settles the waits for its state. */
  notice(n: LifecycleNotice): void {
    this.last.set(n.session, n);
    const ws = this.waiters.get(n.session);
    if (!ws) return;
    for (const w of ws) {
      if (w.state === n.state) {
        ws.delete(w);
        w.resolve(n);
      } else if (n.state === "ended") {
        // No other state follows "ended": a wait for one would never settle.
        ws.delete(w);
        w.reject(endedError(n.session, w.state));
      }
    }
    if (ws.size === 0) this.waiters.delete(n.session);
  }

  /** latest is the session's last notice, if any. */
  latest(session: string): LifecycleNotice | undefined {
    return this.last.get(session);
  }

  /** end forgets session ("" : every session) and rejects its waits SESSION_ENDED. */
  end(session: string): void {
    const ids = session === "" ? [...new Set([...this.last.keys(), ...this.waiters.keys()])] : [session];
    for (const id of ids) {
      this.last.delete(id);
      const ws = this.waiters.get(id);
      this.waiters.delete(id);
      for (const w of ws ?? []) {
        w.reject(endedError(id, w.state));
      }
    }
  }

  /** exit rejects every wait, now and later, TRANSPORT: the sidecar is gone. */
  exit(why: string): void {
    this.gone = why;
    for (const [id, ws] of this.waiters) {
      for (const w of ws) w.reject(localError(LocalDataCode.TRANSPORT, `${why} before a "${w.state}" notice of session ${id}`, METHOD));
    }
    this.waiters.clear();
  }

  /** wait resolves with the session's latest notice when it has state, else the next one that has. */
  wait(session: string, state: LifecycleNoticeState, signal?: AbortSignal): Promise<LifecycleNotice> {
    const n = this.last.get(session);
    if (n !== undefined && n.state === state) return Promise.resolve(n);
    if (n?.state === "ended") return Promise.reject(endedError(session, state));
    if (this.gone !== undefined) return Promise.reject(localError(LocalDataCode.TRANSPORT, `${this.gone}`, METHOD));
    if (signal?.aborted) return Promise.reject(localError(LocalDataCode.CANCELLED, "aborted before the wait began", METHOD, signal.reason));
    return new Promise<LifecycleNotice>((resolve, reject) => {
      let ws = this.waiters.get(session);
      if (!ws) this.waiters.set(session, (ws = new Set()));
      const onAbort = () => {
        const set = this.waiters.get(session);
        set?.delete(w);
        if (set?.size === 0) this.waiters.delete(session);
        reject(localError(LocalDataCode.CANCELLED, `aborted while waiting for "${state}"`, METHOD, signal?.reason));
      };
      const w: Waiter = {
        state,
        resolve: (n) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(n);
        },
        reject: (e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      ws.add(w);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** endedError is a wait's SESSION_ENDED rejection. */
function endedError(session: string, state: LifecycleNoticeState): SidecarError {
  return localError(LocalDataCode.SESSION_ENDED, `session ${session} ended before a "${state}" notice`, METHOD);
}
