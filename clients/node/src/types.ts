/**
 * The host protocol's wire types are generated from the JSON Schema
 * docs/protocol.schema.json into protocol.gen.ts (`npm run gen`; `npm run
 * check` fails when it is stale) and exported under their schema names
 * (OpenParams, OpenResult, PromptResult, StatusResult, Proof, …). This file
 * adds the names this package's API uses for them.
 */
import type * as wire from "./protocol.gen.js";

export type * from "./protocol.gen.js";

/** A cleanup proof (docs/protocol.md §12): the schema's Proof. */
export type CleanupProof = wire.Proof;
/** Params of a session/update notification (docs/protocol.md §9). */
export type SessionUpdateParams = wire.UpdateNotification;
/** Params of a session/requestPermission request (docs/protocol.md §9). */
export type PermissionRequest = wire.RequestPermissionParams;
/** The host's answer to session/requestPermission: selected with an optionId, or cancelled. */
export type PermissionOutcome = wire.RequestPermissionResult;
/** Params of a session/permission audit notification. */
export type PermissionDecision = wire.PermissionNotification;
/** Params of session/exited: a provider died on its own. */
export type Exited = wire.ExitedNotification;
/** Params of session/journal: a session's journal (or record, or ledger)
 * stopped being written (`state: "degraded"`) or works again (`"ok"`, with
 * the `gap` of lost entries); updates keep flowing live meanwhile
 * (docs/protocol.md §16). */
export type JournalNotice = wire.JournalNotification;
/** Params of session/lifecycle (docs/protocol.md §24): a per-turn (or
 * idle-retired warm) session's tree retired (`state: "parked"`, with the
 * retire's `proof`, origin `retire`), is `"reviving"`, or is `"live"`
 * again; `"parked"` with `error` after a revive that failed. */
export type LifecycleNotice = wire.LifecycleNotification;
/** The states a session/lifecycle notice reports. */
export type LifecycleNoticeState = wire.LifecycleNotification["state"];
/** session/policyBreach: the agent moved a control the sidecar holds (docs/protocol.md §24). */
export type PolicyBreachNotice = wire.PolicyBreachNotification;
/** A range of journal entry numbers a reader will not find, and why. */
export type JournalGap = wire.JournalGap;
/** What Session.prompt takes: session/prompt params without `session`. */
export type PromptInput = Omit<wire.PromptParams, "session">;
/** What Session.close takes: session/close params without `session`. */
export type CloseInput = Omit<wire.CloseParams, "session">;
