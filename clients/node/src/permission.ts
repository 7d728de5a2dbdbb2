/** Helpers for answering session/requestPermission (docs/protocol.md §9). */

import type { PermissionOutcome, PermissionRequest } from "./types.js";

/** selected answers with the option whose optionId is given. */
export function selected(optionId: string): PermissionOutcome {
  return { outcome: "selected", optionId };
}

/** cancelled answers `cancelled` (the agent gets no permission). */
export function cancelled(): PermissionOutcome {
  return { outcome: "cancelled" };
}

/**
 * selectKind answers with the first option of that kind (`allow_once`,
 * `reject_once`, …), or `cancelled` when the agent offered none. Note the
 * answer names the option's optionId, never its kind: a kind sent as an
 * optionId counts as cancelled (docs/protocol.md §9).
 */
export function selectKind(req: PermissionRequest, kind: string): PermissionOutcome {
  const o = req.options.find((opt) => opt.kind === kind);
  return o ? selected(o.optionId) : cancelled();
}
