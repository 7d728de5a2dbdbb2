/**
 * The host protocol's wire shapes, as this package's API names them
 * (docs/protocol.md §7–§12). Field names are the wire's.
 */

/** A cleanup proof (docs/protocol.md §12). */
export interface CleanupProof {
  cleanupId: string;
  session: string;
  sessionKey: string;
  reason: string;
  origin: "close" | "admission" | "shutdown" | "provider-exit" | "recovered" | string;
  protocolClose: { outcome: string; error?: string };
  signals: Array<{ signal: string; target: string; at: string; error?: string }>;
  processes: Array<{ pid: number; role: string; exitCode: number | null; signal?: string; exitedAt: string }>;
  containment: string;
  verified: { treeEmpty: boolean; method: string };
  complete: boolean;
  attempts: number;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  errors: Array<{ code: string; message: string }>;
}

/** `command` of session/open: an absolute path, argv[1:], an optional SHA-256. */
export interface Command {
  path: string;
  args?: string[];
  sha256?: string;
}

/** ToolKinds a permission policy names (docs/protocol.md §8). */
export type ToolKind =
  | "read" | "edit" | "delete" | "move" | "search" | "execute" | "think" | "fetch" | "switch_mode" | "other";

/** Params of session/open (docs/protocol.md §8). `env` is secret. */
export interface OpenParams {
  sessionKey: string;
  agent: string;
  command: Command;
  cwd: string;
  env?: Record<string, string>;
  stateDir?: string;
  model?: string;
  mode?: string;
  systemPrompt?: string;
  permissionMode?: "approve-all" | "approve-reads" | "deny-all";
  permissionPolicy?: {
    autoApprove?: ToolKind[];
    autoDeny?: ToolKind[];
    escalate?: ToolKind[];
    defaultAction?: "approve" | "deny" | "escalate";
  };
  nonInteractivePermissions?: "deny" | "fail";
  mcpServers?: unknown[];
  handshakeTimeoutMs?: number;
  resume?: boolean;
}

/** `{acpxRecordId, backendSessionId, agentSessionId}` (docs/protocol.md §8). */
export interface Identity {
  acpxRecordId: string;
  backendSessionId: string;
  agentSessionId: string;
}

/** `models` of open, status and setModel. */
export interface Models {
  currentModelId: string;
  availableModelIds: string[];
}

/** `modes` of open, status and setMode. */
export interface Modes {
  currentModeId: string;
  availableModeIds: string[];
}

/** Token usage of a turn or a session. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cachedReadTokens?: number;
  cachedWriteTokens?: number;
  thoughtTokens?: number;
}

/** `permissionBinding` of open and status (docs/protocol.md §8). */
export interface PermissionBinding {
  bound: boolean;
  mode?: string;
  via: string;
  autonomous: boolean;
}

/** Result of session/open (docs/protocol.md §8). */
export interface OpenResult {
  session: string;
  sessionKey: string;
  identity: Identity;
  resumed: boolean;
  agent: { name: string; title?: string; version: string; protocolVersion: number; capabilities: Record<string, unknown> };
  models?: Models;
  modes?: Modes;
  configOptions: Array<Record<string, unknown>>;
  process: { pid: number; pgid: number; startedAt: string; containment: string };
  permissionBinding: PermissionBinding;
}

/** What {@link Session.prompt} takes: session/prompt params without `session`. */
export interface PromptParams {
  requestId: string;
  /** A non-empty string, or ACP ContentBlock[]. */
  prompt: string | Array<Record<string, unknown>>;
  /** Optional turn bound, 1–86400000 ms (docs/protocol.md §8). */
  timeoutMs?: number;
}

/** Result of session/prompt: a normal result however the turn ended. */
export interface PromptResult {
  requestId: string;
  status: "completed" | "cancelled" | "failed";
  stopReason?: string;
  usage?: Usage;
  cost?: { amount: number; currency: string; basis: "turn" };
  error?: { code: string; message: string; retryable: boolean };
}

/** Params of the session/update notification (docs/protocol.md §9). */
export interface SessionUpdateParams {
  session: string;
  requestId: string | null;
  seq: number;
  /** The ACP SessionUpdate verbatim (`sessionUpdate` names its kind). */
  update: { sessionUpdate: string; [k: string]: unknown };
}

/** An ACP PermissionOption. */
export interface PermissionOption {
  optionId: string;
  name: string;
  kind: "allow_once" | "allow_always" | "reject_once" | "reject_always" | string;
}

/** Params of session/requestPermission (docs/protocol.md §9). */
export interface PermissionRequest {
  session: string;
  requestId: string | null;
  toolCall: Record<string, unknown>;
  options: PermissionOption[];
  kind: string;
  rule: string;
}

/** The host's answer to a session/requestPermission. */
export type PermissionOutcome = { outcome: "selected"; optionId: string } | { outcome: "cancelled" };

/** Params of the session/permission audit notification. */
export interface PermissionDecision {
  session: string;
  requestId: string | null;
  toolCallId: string;
  kind: string;
  decision: "approved" | "denied" | "escalated" | "cancelled";
  rule: string;
  optionId?: string;
}

/** Params of session/exited: the provider died on its own. */
export interface Exited {
  session: string;
  sessionKey: string;
  pid: number;
  exitCode?: number;
  signal?: string;
  during: "idle" | "turn";
}

/** Result of session/status (docs/protocol.md §8). */
export interface StatusResult {
  session: string;
  sessionKey: string;
  agent: string;
  state: "admitting" | "open" | "turn" | "closing" | "closed" | "dead";
  identity: Identity;
  closed: boolean;
  lastRequestId: string | null;
  models?: Models;
  modes?: Modes;
  configOptions?: Array<Record<string, unknown>>;
  usage?: { cumulative: Usage; perRequest: Record<string, Usage> };
  cost?: { amount: number; currency: string; basis: "session-cumulative" };
  process: { pid: number; alive: boolean };
  summary: string;
  permissionBinding?: PermissionBinding;
}

/** Result of initialize (docs/protocol.md §7). */
export interface InitializeResult {
  protocolVersion: number;
  serverInfo: { name: string; version: string };
  pid: number;
  capabilities: { containment: string; agents: string[]; framing: string; maxFrameBytes: number };
  bounds: Record<string, number>;
}

/** Params of session/close without `session`. */
export interface CloseParams {
  /** Copied into the proof; the sidecar's default is "host close". */
  reason?: string;
  /** true deletes the session record (no later resume). Default false. */
  discardPersistentState?: boolean;
}
