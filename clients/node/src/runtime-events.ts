/**
 * The runtime port's event and result shapes — those of acpx's runtime
 * (`AcpRuntimeEvent`, `AcpRuntimeTurnResult`) — and the maps from the
 * sidecar's updates and prompt results to them (runtime-port.ts).
 */

import type { PromptResult, SessionUpdateParams, Usage } from "./types.js";

/** acpx's runtime events, as startTurn(...).events yields them. */
export type AcpxRuntimeEvent =
  | { type: "text_delta"; text: string; stream: "output" | "thought"; tag: string; messageId?: string }
  | {
      type: "status";
      text: string;
      tag: string;
      used?: number;
      size?: number;
      cost?: { amount: number; currency: string };
      entries?: unknown[];
      availableCommands?: Array<{ name: string; description?: string; hasInput: boolean }>;
    }
  | {
      type: "tool_call";
      text: string;
      tag: string;
      toolCallId?: string;
      status?: string;
      title?: string;
      kind?: string;
      locations?: unknown[];
      rawInput?: unknown;
      rawOutput?: unknown;
      content?: unknown[];
    };

/** acpx's turn result; `usage` and `cost` are the sidecar's additions. */
export type AcpxRuntimeTurnResult =
  | { status: "completed" | "cancelled"; stopReason?: string; usage?: Usage; cost?: PromptResult["cost"] }
  | { status: "failed"; stopReason?: string; usage?: Usage; error: { message: string; code: string; retryable: boolean } };

/** toResult maps a sidecar prompt result to acpx's turn result. */
export function toResult(r: PromptResult): AcpxRuntimeTurnResult {
  const extra = {
    ...(r.stopReason !== undefined ? { stopReason: r.stopReason } : {}),
    ...(r.usage ? { usage: r.usage } : {}),
  };
  if (r.status === "failed") {
    const e = r.error ?? { code: "ACPX_SESSION_ENSURE_FAILED", message: "the turn failed", retryable: false };
    return { status: "failed", ...extra, error: { message: e.message, code: e.code, retryable: e.retryable } };
  }
  return { status: r.status, ...extra, ...(r.cost ? { cost: r.cost } : {}) };
}

/** toEvent maps one ACP SessionUpdate to acpx's event shape (undefined: not an event). */
export function toEvent(p: SessionUpdateParams): AcpxRuntimeEvent | undefined {
  const u = p.update as Record<string, unknown> & { sessionUpdate: string };
  const tag = u.sessionUpdate;
  switch (tag) {
    case "agent_message_chunk":
    case "agent_thought_chunk": {
      const c = u["content"] as { type?: string; text?: string } | undefined;
      if (c?.type !== "text" || typeof c.text !== "string") return undefined;
      return {
        type: "text_delta",
        text: c.text,
        stream: tag === "agent_thought_chunk" ? "thought" : "output",
        tag,
        ...(typeof u["messageId"] === "string" && u["messageId"] !== "" ? { messageId: u["messageId"] as string } : {}),
      };
    }
    case "user_message_chunk":
      return undefined;
    case "tool_call":
    case "tool_call_update": {
      const title = typeof u["title"] === "string" ? (u["title"] as string) : undefined;
      const ev: AcpxRuntimeEvent = { type: "tool_call", text: title ?? String(u["toolCallId"] ?? tag), tag };
      for (const k of ["toolCallId", "status", "title", "kind", "locations", "rawInput", "rawOutput", "content"] as const) {
        if (u[k] !== undefined) (ev as Record<string, unknown>)[k] = u[k];
      }
      return ev;
    }
    case "usage_update": {
      const used = typeof u["used"] === "number" ? (u["used"] as number) : undefined;
      const size = typeof u["size"] === "number" ? (u["size"] as number) : undefined;
      return {
        type: "status",
        text: `usage updated: ${used ?? "?"}/${size ?? "?"}`,
        tag,
        ...(used !== undefined ? { used } : {}),
        ...(size !== undefined ? { size } : {}),
        ...(u["cost"] ? { cost: u["cost"] as { amount: number; currency: string } } : {}),
      };
    }
    case "plan":
      return { type: "status", text: "plan updated", tag, entries: Array.isArray(u["entries"]) ? (u["entries"] as unknown[]) : [] };
    case "available_commands_update": {
      const cmds = Array.isArray(u["availableCommands"]) ? (u["availableCommands"] as Array<Record<string, unknown>>) : [];
      return {
        type: "status",
        text: "available commands updated",
        tag,
        availableCommands: cmds
          .filter((c) => typeof c["name"] === "string")
          .map((c) => ({
            name: c["name"] as string,
            ...(typeof c["description"] === "string" ? { description: c["description"] as string } : {}),
            hasInput: c["input"] !== undefined && c["input"] !== null,
          })),
      };
    }
    case "current_mode_update":
      return { type: "status", text: `mode ${String(u["currentModeId"] ?? "")}`, tag };
    default:
      return { type: "status", text: tag.replaceAll("_", " "), tag };
  }
}
