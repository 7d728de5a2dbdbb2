/**
 * UpdateQueue is the buffer behind Turn.updates and Turn.updateBatches():
 * the connection pushes each session/update of the turn as it arrives
 * (wire order, which is `seq` order: docs/protocol.md §6), and one
 * consumer reads them, one at a time (the async iterator) or a batch at a
 * time (batches()). It holds everything until read, so a consumer that
 * starts late loses nothing; `end()` (the turn's answer arrived) lets the
 * reading finish once the buffer is drained.
 *
 * A batch is everything buffered when the consumer asks; a consumer that
 * waits gets, in one batch, every update pushed before control returns to
 * the event loop (the reader pushes a whole read of the pipe at once).
 */
/** A settled promise: `RESOLVED.then(f)` runs f as a plain microtask
 * (Node's queueMicrotask makes an AsyncResource per call). */
const RESOLVED = Promise.resolve();

export class UpdateQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private head = 0;
  private ended = false;
  private iterated = false;
  /** A one-at-a-time consumer waiting for the next item. */
  private waiter: ((r: IteratorResult<T>) => void) | undefined;
  /** A batch consumer waiting; resolved once the current task's pushes are in. */
  private batchWaiter: ((r: IteratorResult<T[]>) => void) | undefined;
  private batchScheduled = false;
  private readonly release = () => this.releaseBatch();

  /** isEnded: end() was called (the turn's answer came, or the reader stopped). */
  get isEnded(): boolean {
    return this.ended;
  }

  /** push appends an item; ignored after end(). */
  push(item: T): void {
    if (this.ended) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ value: item, done: false });
      return;
    }
    this.items.push(item);
    if (this.batchWaiter && !this.batchScheduled) {
      this.batchScheduled = true;
      void RESOLVED.then(this.release);
    }
  }

  /** end marks the last item: reading finishes after the buffer drains. */
  end(): void {
    this.ended = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ value: undefined, done: true });
    }
    if (this.batchWaiter && !this.batchScheduled) {
      this.batchScheduled = true;
      void RESOLVED.then(this.release);
    }
  }

  /** One reading only (this or batches()): a second gets a TypeError. */
  [Symbol.asyncIterator](): AsyncIterator<T> {
    this.claim();
    return {
      next: () => {
        if (this.head < this.items.length) {
          const item = this.items[this.head]!;
          this.items[this.head++] = undefined as T; // let it be collected
          if (this.head === this.items.length) {
            this.items = [];
            this.head = 0;
          } else if (this.head > 4096 && this.head * 2 > this.items.length) {
            // A consumer that never quite catches up: drop the read slots.
            this.items = this.items.slice(this.head);
            this.head = 0;
          }
          return Promise.resolve({ value: item, done: false });
        }
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiter = resolve;
        });
      },
      return: () => this.stop(),
    };
  }

  /**
   * batches reads the items as arrays: each non-empty, in order, holding
   * everything buffered when it was asked for (the array is the caller's).
   * One reading only (this or the iterator).
   */
  batches(): AsyncIterable<T[]> {
    this.claim();
    return {
      [Symbol.asyncIterator]: () => ({
        next: (): Promise<IteratorResult<T[]>> => {
          if (this.head < this.items.length) return Promise.resolve({ value: this.take(), done: false });
          if (this.ended) return Promise.resolve({ value: undefined, done: true });
          return new Promise((resolve) => {
            this.batchWaiter = resolve;
          });
        },
        return: () => this.stop() as Promise<IteratorResult<T[]>>,
      }),
    };
  }

  private claim(): void {
    if (this.iterated) throw new TypeError("a turn's updates can be iterated once");
    this.iterated = true;
  }

  /** take removes and returns everything buffered. */
  private take(): T[] {
    const batch = this.head === 0 ? this.items : this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    return batch;
  }

  private releaseBatch(): void {
    this.batchScheduled = false;
    const w = this.batchWaiter;
    if (!w) return;
    if (this.head < this.items.length) {
      this.batchWaiter = undefined;
      w({ value: this.take(), done: false });
    } else if (this.ended) {
      this.batchWaiter = undefined;
      w({ value: undefined, done: true });
    }
  }

  /** The consumer stopped early (break, or a pending next() given up):
   * drop what is left and finish a read still waiting. */
  private stop(): Promise<IteratorResult<never>> {
    this.items = [];
    this.head = 0;
    this.end();
    if (this.batchWaiter) {
      const w = this.batchWaiter;
      this.batchWaiter = undefined;
      w({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }
}
