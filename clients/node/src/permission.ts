/** Helpers for answering session/requestPermission (docs/protocol.md §9). */

import type { PermissionOutcome, PermissionRequest } from "./types.js";

/**
 * Answers one session/requestPermission (docs/protocol.md §9). `signal`
 * aborts when the sidecar settled the ask without this answer: a
 * `session/permission` decision for it (e.g. `timeout` at
 * `permissionTimeoutMs`, `cancelled`), the end of its turn, the session's
 * `session/exited`, or the sidecar's exit. An answer after that is ignored.
 */
export type PermissionHandler = (
  req: PermissionRequest,
  ctx: { signal: AbortSignal },
) => PermissionOutcome | Promise<PermissionOutcome>;

/**
 * askHandler runs handler on one ask and returns its answer: `selected`
 * with the handler's optionId when the agent offered it, else `cancelled`
 * — when the handler fails, answers anything else, selects an optionId
 * the agent did not offer, or `settled` aborts first (once the sidecar
 * settled the ask, a late answer changes nothing). onError hears why a
 * handler that threw, rejected, answered in no known shape or selected
 * an option not offered was taken as `cancelled` (the Sidecar's
 * `"handlerError"` event).
 */
export async function askHandler(
  handler: PermissionHandler,
  req: PermissionRequest,
  settled: AbortSignal,
  onError: (error: unknown) => void = () => {},
): Promise<PermissionOutcome> {
  const abortedMark = Symbol("aborted");
  const aborted = new Promise<typeof abortedMark>((resolve) => settled.addEventListener("abort", () => resolve(abortedMark), { once: true }));
  try {
    const out = await Promise.race([Promise.resolve(handler(req, { signal: settled })), aborted]);
    if (out === abortedMark) return { outcome: "cancelled" };
    if (out && out.outcome === "selected" && typeof out.optionId === "string") {
      if (req.options.some((o) => o.optionId === out.optionId)) return { outcome: "selected", optionId: out.optionId };
      // The sidecar would take it as cancelled too; a typo is said here.
      const offered = req.options.map((o) => o.optionId);
      onError(new TypeError(`the permission handler selected optionId ${JSON.stringify(out.optionId)}, which the agent did not offer (offered: ${JSON.stringify(offered)}): answered cancelled`));
      return { outcome: "cancelled" };
    }
    if (!(out && out.outcome === "cancelled")) {
      onError(new TypeError(`the permission handler answered ${JSON.stringify(out)}: want {outcome: "selected", optionId} or {outcome: "cancelled"}`));
    }
  } catch (err) {
    // A failing handler must not approve anything: cancelled, and said.
    onError(err);
  }
  return { outcome: "cancelled" };
}

/** selected answers with the option whose optionId is given. */
export function selected(optionId: string): PermissionOutcome {
  return { outcome: "selected", optionId };
}

/** cancelled answers `cancelled` (the agent gets no permission). */
export function cancelled(): PermissionOutcome {
  return { outcome: "cancelled" };
}

/** The ACP permission option kinds (ACP PermissionOptionKind). */
const optionKinds = ["allow_once", "allow_always", "reject_once", "reject_always"];

/**
 * selectKind answers with the first option of that kind (`allow_once`,
 * `allow_always`, `reject_once` or `reject_always`), or `cancelled` when
 * the agent offered none. Note the answer names the option's optionId,
 * never its kind: a kind sent as an optionId counts as cancelled
 * (docs/protocol.md §9). Throws a TypeError for any other kind (a typo):
 * inside a permission handler that is answered `cancelled` and reported
 * as a `"handlerError"`.
 */
export function selectKind(req: PermissionRequest, kind: string): PermissionOutcome {
  if (!optionKinds.includes(kind)) {
    throw new TypeError(`selectKind: unknown kind ${JSON.stringify(kind)}: want one of ${optionKinds.join(", ")}`);
  }
  const o = req.options.find((opt) => opt.kind === kind);
  return o ? selected(o.optionId) : cancelled();
}

/** askKey names one permission ask: session, requestId, toolCallId. @internal */
export function askKey(session: string, requestId: string | null | undefined, toolCallId: string | undefined): string {
  return session + "\0" + (requestId ?? "") + "\0" + (toolCallId ?? "");
}

/** toolCallIdOf is the ask's toolCall.toolCallId, if any. @internal */
export function toolCallIdOf(req: PermissionRequest): string | undefined {
  const tc = req.toolCall as { toolCallId?: unknown } | undefined;
  return typeof tc?.toolCallId === "string" ? tc.toolCallId : undefined;
}
