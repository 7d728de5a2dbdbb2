import type { Message, MessageWriter } from "vscode-jsonrpc/node";

import { SidecarError } from "./errors.js";

/**
 * TappedWriter shows each message to onFrame before writing it, and
 * refuses (without writing or showing it) a request whose frame is larger
 * than maxFrameBytes (docs/protocol.md §3), leaving the refusal in
 * `refused` for Sidecar.request.
 */
export class TappedWriter implements MessageWriter {
  /** The sidecar's maxFrameBytes once initialize answered; until then no limit. */
  maxFrameBytes = Infinity;
  /** The last refused request's error, taken by Sidecar.request. */
  refused: SidecarError | undefined;
  constructor(
    private readonly inner: MessageWriter,
    private readonly onFrame: ((direction: "sent" | "received", message: Message) => void) | undefined,
    /** True once the sidecar's stdin is gone: a write then would throw
     * ERR_STREAM_DESTROYED out of the stream, uncaught (a handler that
     * answers after the sidecar exited crashed the host). */
    private readonly gone: () => boolean = () => false,
  ) {}
  get onError() {
    return this.inner.onError;
  }
  get onClose() {
    return this.inner.onClose;
  }
  write(msg: Message): Promise<void> {
    const req = msg as { id?: unknown; method?: unknown };
    if (this.maxFrameBytes !== Infinity && typeof req.method === "string" && req.id !== undefined) {
      // vscode-jsonrpc encodes JSON.stringify(msg) as UTF-8: the frame body.
      const frameBytes = Buffer.byteLength(JSON.stringify(msg), "utf8");
      if (frameBytes > this.maxFrameBytes) {
        const err = new SidecarError(
          -32600,
          "INVALID_REQUEST",
          `${req.method}: the request's frame is ${frameBytes} bytes, more than the sidecar's maxFrameBytes (${this.maxFrameBytes}); not sent`,
          { method: req.method, data: { code: "INVALID_REQUEST", retryable: false, frameBytes, maxFrameBytes: this.maxFrameBytes } },
        );
        this.refused = err;
        return Promise.reject(err);
      }
    }
    if (this.gone()) {
      // Nobody reads it: a request fails (its caller sees the sidecar's
      // exit), an answer or notification is dropped.
      return typeof req.method === "string" && req.id !== undefined
        ? Promise.reject(new Error("the sidecar's stdin is closed"))
        : Promise.resolve();
    }
    this.onFrame?.("sent", msg);
    return this.inner.write(msg);
  }
  end(): void {
    this.inner.end();
  }
  dispose(): void {
    this.inner.dispose();
  }
}
