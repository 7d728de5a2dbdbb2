/**
 * Typed reading of ACP updates. A session/update's `update` is the agent's
 * ACP SessionUpdate verbatim (docs/protocol.md §9), typed as
 * `{sessionUpdate: string, [k]: unknown}` by the schema, so strict
 * TypeScript cannot read `update.content.text` directly; these helpers do.
 */

import type { SessionUpdate, SessionUpdateParams } from "./types.js";

/** The ACP update kinds whose `content` is one ContentBlock (a chunk of a message). */
export const CHUNK_KINDS: ReadonlySet<string> = new Set(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]);

/**
 * textOf returns the text of a message chunk: `content.text` of an
 * `agent_message_chunk`, `agent_thought_chunk` or `user_message_chunk`
 * whose content block is `{type: "text", text}`. Anything else (tool
 * calls, usage, plans, an image chunk) gives undefined. Takes the
 * session/update params (Turn.updates' items, the Sidecar's `"update"`
 * event) or their `update` member.
 */
export function textOf(u: SessionUpdateParams | SessionUpdate): string | undefined {
  const upd: SessionUpdate = "sessionUpdate" in u && typeof u.sessionUpdate === "string" ? (u as SessionUpdate) : (u as SessionUpdateParams).update;
  if (!upd || !CHUNK_KINDS.has(upd.sessionUpdate)) return undefined;
  const c = upd["content"];
  if (c === null || typeof c !== "object") return undefined;
  const block = c as { type?: unknown; text?: unknown };
  return block.type === "text" && typeof block.text === "string" ? block.text : undefined;
}
