/**
 * LspReader: the connection's MessageReader. It reads the sidecar's stdout
 * in LSP framing (`Content-Length: N\r\n\r\n` then N bytes of JSON,
 * docs/protocol.md §3), parses each message once, shows it to onFrame, and
 * hands it on, in wire order, either to vscode-jsonrpc or, for a
 * `session/update` notification, straight to `updates` (the Sidecar's
 * router: the fast path, docs/architecture.md "Host clients").
 *
 * Why not vscode-jsonrpc's StreamMessageReader for updates: it decodes
 * each message behind a promise-based lock, and the connection then
 * dispatches one queued message per `setImmediate`: about 15 µs of host
 * CPU per update, six times the cost of reading the stream itself. A turn
 * is nearly all updates, and they need no dispatch: they are routed to
 * their turn's queue. Every other message (responses, requests, other
 * notifications) still goes through vscode-jsonrpc; whatever is read while
 * such a message waits there to be dispatched is held here and follows it
 * once it was, so the order of the wire holds for every listener.
 */

import { AbstractMessageReader, Disposable, type DataCallback, type Message } from "vscode-jsonrpc/node";
import { isAscii } from "node:buffer";
import type { Readable } from "node:stream";

const HEADER_END = Buffer.from("\r\n\r\n");
const CONTENT_LENGTH = "content-length";

export class LspReader extends AbstractMessageReader {
  /**
   * The message handed to vscode-jsonrpc and not dispatched yet, if any:
   * everything read after it is held, so there is never more than one.
   */
  private waiting: Message | undefined;
  /** Messages read while an earlier one waited in vscode-jsonrpc, in order, from heldHead. */
  private held: Message[] = [];
  private heldHead = 0;
  private drainScheduled = false;
  private callback: DataCallback | undefined;
  /** The fast path: takes a session/update's params; set by the Sidecar. */
  updates: ((params: object) => void) | undefined;

  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Bytes the message at the start of `chunks` needs (header included), or -1 while its header is incomplete. */
  private need = -1;

  constructor(
    private readonly readable: Readable,
    private readonly onFrame: ((direction: "sent" | "received", message: Message) => void) | undefined,
  ) {
    super();
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    const onData = (chunk: Buffer) => this.onData(chunk, callback);
    const onError = (err: Error) => this.fireError(err);
    const onClose = () => this.fireClose();
    this.readable.on("data", onData);
    this.readable.on("error", onError);
    this.readable.on("close", onClose);
    return Disposable.create(() => {
      this.readable.off("data", onData);
      this.readable.off("error", onError);
      this.readable.off("close", onClose);
    });
  }

  private onData(chunk: Buffer, callback: DataCallback): void {
    if (this.buffered > 0) {
      // A message began in an earlier read: complete it with as many bytes
      // of this one as it needs (joining whole reads would copy each).
      if (this.need < 0) this.need = this.headerNeed(chunk);
      if (this.need < 0) {
        // Its header is not whole even with this read's first bytes (rare):
        // join everything and read on.
        this.chunks.push(chunk);
        const all = Buffer.concat(this.chunks, this.buffered + chunk.length);
        this.reset();
        this.parse(all, callback);
        return;
      }
      if (this.buffered + chunk.length < this.need) {
        this.chunks.push(chunk);
        this.buffered += chunk.length;
        return;
      }
      const rest = this.need - this.buffered;
      this.chunks.push(chunk.subarray(0, rest));
      const first = Buffer.concat(this.chunks, this.need);
      this.reset();
      if (!this.parse(first, callback)) return;
      chunk = chunk.subarray(rest);
      if (chunk.length === 0) return;
    }
    this.parse(chunk, callback);
  }

  /**
   * headerNeed is the size of the message whose start is buffered (header
   * included), read from its header completed by chunk's first bytes, or
   * -1 when those do not complete it.
   */
  private headerNeed(chunk: Buffer): number {
    const head = Buffer.concat([...this.chunks, chunk.subarray(0, 256)]);
    const hdrEnd = head.indexOf(HEADER_END);
    if (hdrEnd < 0) return -1;
    const length = contentLength(head, 0, hdrEnd);
    return length < 0 ? -1 : hdrEnd + HEADER_END.length + length;
  }

  private reset(): void {
    this.chunks = [];
    this.buffered = 0;
    this.need = -1;
  }

  /**
   * parse delivers every whole message of buf, which starts at a message,
   * and keeps the partial one at its end for the next read. It returns
   * false when a header has no usable Content-Length: the stream is lost
   * (reported, everything buffered dropped).
   */
  private parse(buf: Buffer, callback: DataCallback): boolean {
    // An ASCII read (the usual case) is decoded once, and its messages
    // are slices of that string; otherwise each message body is decoded
    // from its bytes (Content-Length counts bytes).
    const str = isAscii(buf) ? buf.toString("latin1") : undefined;
    let pos = 0;
    for (;;) {
      const hdrEnd = str !== undefined ? str.indexOf("\r\n\r\n", pos) : buf.indexOf(HEADER_END, pos);
      if (hdrEnd < 0) {
        this.need = -1;
        break;
      }
      const length = contentLength(buf, pos, hdrEnd);
      if (length < 0) {
        this.fireError(new Error(`Header must provide a valid Content-Length: ${JSON.stringify(buf.toString("latin1", pos, hdrEnd))}`));
        this.reset();
        return false;
      }
      const start = hdrEnd + HEADER_END.length;
      const end = start + length;
      if (end > buf.length) {
        this.need = end - pos;
        break;
      }
      this.need = -1;
      pos = end;
      let msg: Message;
      try {
        msg = JSON.parse(str !== undefined ? str.slice(start, end) : buf.toString("utf8", start, end)) as Message;
      } catch (err) {
        this.fireError(err as Error);
        continue;
      }
      this.deliver(msg, callback);
    }
    if (pos < buf.length) {
      const rest = buf.subarray(pos);
      this.chunks = [rest];
      this.buffered = rest.length;
    } else {
      this.chunks = [];
      this.buffered = 0;
    }
    return true;
  }

  /**
   * deliver passes one message on, after every message read before it:
   * while a message handed to vscode-jsonrpc waits there to be
   * dispatched, later ones are held here, in order.
   */
  private deliver(msg: Message, callback: DataCallback): void {
    this.onFrame?.("received", msg);
    if (this.waiting !== undefined || this.heldHead < this.held.length) {
      this.held.push(msg);
      return;
    }
    this.pass(msg, callback);
  }

  /** pass routes an update itself, or hands the message to vscode-jsonrpc. */
  private pass(msg: Message, callback: DataCallback): void {
    const m = msg as { method?: unknown; id?: unknown; params?: unknown };
    if (
      this.updates !== undefined &&
      m.method === "session/update" &&
      m.id === undefined &&
      typeof m.params === "object" &&
      m.params !== null &&
      !Array.isArray(m.params)
    ) {
      try {
        this.updates(m.params);
      } catch {
        // A throwing listener: vscode-jsonrpc ignores a notification
        // handler's throw too (its NullLogger).
      }
      return;
    }
    // vscode-jsonrpc may consume a $/cancelRequest at once, never to
    // dispatch it: not waited for (the sidecar sends none).
    if (m.method !== "$/cancelRequest") this.waiting = msg;
    callback(msg);
  }

  /**
   * dispatched is called by the connection's messageStrategy once it has
   * dispatched a message this reader handed on. The held messages follow
   * on the next turn of the event loop, after the microtasks that
   * dispatch started (a turn's result settling and ending its updates),
   * as vscode-jsonrpc would dispatch its next message.
   */
  dispatched(msg: Message): void {
    if (msg !== this.waiting) return;
    this.waiting = undefined;
    if (this.heldHead < this.held.length && !this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(() => {
        this.drainScheduled = false;
        this.drain();
      });
    }
  }

  /** Whether a message read is not yet dispatched (held, or in vscode-jsonrpc's queue). */
  get busy(): boolean {
    return this.waiting !== undefined || this.heldHead < this.held.length;
  }

  private drain(): void {
    const callback = this.callback;
    if (callback === undefined) return;
    while (this.heldHead < this.held.length && this.waiting === undefined) {
      const msg = this.held[this.heldHead]!;
      this.held[this.heldHead++] = undefined as unknown as Message;
      this.pass(msg, callback);
    }
    if (this.heldHead === this.held.length) {
      this.held = [];
      this.heldHead = 0;
    }
  }
}

/**
 * contentLength reads the Content-Length header of the header block
 * buf[pos, hdrEnd) (names case-insensitive, other headers ignored), or -1.
 */
function contentLength(buf: Buffer, pos: number, hdrEnd: number): number {
  // The sidecar writes exactly "Content-Length: N".
  if (buf[pos] === 0x43 && buf.toString("latin1", pos, pos + 16) === "Content-Length: ") {
    let n = 0;
    let i = pos + 16;
    for (; i < hdrEnd; i++) {
      const c = buf[i]! - 0x30;
      if (c < 0 || c > 9) break;
      n = n * 10 + c;
    }
    if (i === hdrEnd && i > pos + 16) return n;
  }
  for (const line of buf.toString("latin1", pos, hdrEnd).split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === CONTENT_LENGTH) {
      const v = line.slice(colon + 1).trim();
      return /^\d+$/.test(v) ? Number(v) : -1;
    }
  }
  return -1;
}
