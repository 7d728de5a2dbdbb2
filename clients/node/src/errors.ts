/**
 * Errors of @acpx-sidecar/client. Every rejection of this package is a
 * {@link SidecarError}: errors the sidecar sent carry its JSON-RPC `code`
 * and its stable `data.code` (docs/protocol.md §5); errors this package
 * makes itself have `code` 0 and one of the {@link LocalDataCode} values.
 * Switch on `dataCode`, never on `message`.
 */

import { ResponseError } from "vscode-jsonrpc/node";

import type { CleanupProof, DataCode, ErrorData } from "./types.js";

/**
 * Data codes of errors this package makes itself (never sent by the
 * sidecar; `code` is then 0). The same names as the Go client's
 * (client/errors.go), plus `BINARY_NOT_FOUND`.
 */
export const LocalDataCode = {
  /** The request could not be sent or its answer never came: the
   * sidecar's pipes are closed or the process exited. */
  TRANSPORT: "TRANSPORT",
  /** The caller's AbortSignal was aborted before the call was sent, or
   * during spawnSidecar's start. An abort after the call was sent asks the
   * sidecar to end it (`$/cancelRequest`, docs/protocol.md §7): the call
   * then settles with the sidecar's answer, whose `cause` is the signal's
   * reason. */
  CANCELLED: "CANCELLED",
  /** spawnSidecar could not launch the sidecar or was given bad options. */
  START_FAILED: "START_FAILED",
  /** No acpx-sidecar executable was found: no `binary` option, no
   * ACPX_SIDECAR_BINARY and no installed platform package. */
  BINARY_NOT_FOUND: "BINARY_NOT_FOUND",
  /** The sidecar answered with a result this package cannot use. */
  BAD_RESULT: "BAD_RESULT",
  /** Session.waitLifecycle: the session ended (closed, its provider
   * exited, SESSION_LOST, shutdown) before the state waited for
   * (docs/protocol.md §24). */
  SESSION_ENDED: "SESSION_ENDED",
} as const;

/** One of {@link LocalDataCode}'s values. */
export type LocalDataCode = (typeof LocalDataCode)[keyof typeof LocalDataCode];

/**
 * Every `dataCode` a {@link SidecarError} can have: the schema's `DataCode`
 * union (docs/protocol.schema.json `$defs/DataCode`, docs/protocol.md §5)
 * plus this package's {@link LocalDataCode}s. A union of string literals,
 * so it is assignable to `string`; comparing it with a code outside the
 * union is a type error (a typo cannot compile).
 */
export type SidecarDataCode = DataCode | LocalDataCode;

/**
 * SidecarError is every error this package rejects with.
 *
 * - `code`: the JSON-RPC error code (-32000 domain failure, -32602 bad
 *   params, …; docs/protocol.md §5), or 0 for a local error.
 * - `dataCode`: the error's `data.code` (`SESSION_NOT_FOUND`,
 *   `INVALID_PARAMS`, `CLEANUP_INCOMPLETE`, …) or a {@link LocalDataCode}.
 * - `data`: the error's whole `data` member verbatim, typed as the
 *   schema's `ErrorData` (`heldBy`, `queued`, `capability`, … with their
 *   unions), plus members this package adds to a local INVALID_REQUEST
 *   (`frameBytes`, `maxFrameBytes`); undefined for other local errors.
 * - `method`: the request that failed ("session/open", …), or "" .
 */
export class SidecarError extends Error {
  readonly code: number;
  readonly dataCode: SidecarDataCode;
  readonly data: SidecarErrorData | undefined;
  readonly method: string;

  constructor(
    code: number,
    dataCode: SidecarDataCode,
    message: string,
    opts: { data?: SidecarErrorData; method?: string; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "SidecarError";
    this.code = code;
    this.dataCode = dataCode;
    this.data = opts.data;
    this.method = opts.method ?? "";
  }

  /** `data.retryable` (docs/protocol.md §5); false for local errors. */
  get retryable(): boolean {
    return this.data?.["retryable"] === true;
  }

  /** `data.field`: the dot path of the first bad parameter of a -32602. */
  get field(): string | undefined {
    const f = this.data?.["field"];
    return typeof f === "string" ? f : undefined;
  }

  /**
   * The cleanup proof the error carries: `data.cleanup` of a failed
   * session/open that got as far as its admission, or `data.proof` of
   * `CLEANUP_INCOMPLETE` from session/close (docs/protocol.md §5, §12).
   */
  get proof(): CleanupProof | undefined {
    const p = this.data?.["cleanup"] ?? this.data?.["proof"];
    return p !== null && typeof p === "object" ? (p as CleanupProof) : undefined;
  }
}

/** SidecarErrorData is {@link SidecarError.data}: the schema's ErrorData,
 * open to members a newer sidecar adds. */
export type SidecarErrorData = ErrorData & Record<string, unknown>;

/** localError makes a {@link SidecarError} with code 0. */
export function localError(dataCode: LocalDataCode, message: string, method = "", cause?: unknown): SidecarError {
  return new SidecarError(0, dataCode, message, { method, cause });
}

/** toSidecarError maps a vscode-jsonrpc failure to a SidecarError. */
export function toSidecarError(err: unknown, method: string): SidecarError {
  if (err instanceof SidecarError) return err;
  if (err instanceof ResponseError) {
    const data = err.data !== null && typeof err.data === "object" ? (err.data as SidecarErrorData) : undefined;
    const dataCode = typeof data?.["code"] === "string" ? (data["code"] as SidecarDataCode) : undefined;
    if (dataCode !== undefined) return new SidecarError(err.code, dataCode, err.message, { data, method, cause: err });
    // No data.code: an error of the transport (vscode-jsonrpc's own codes,
    // e.g. a closed connection or a failed write), not of the sidecar.
    return localError(LocalDataCode.TRANSPORT, err.message, method, err);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return localError(LocalDataCode.TRANSPORT, msg, method, err);
}
