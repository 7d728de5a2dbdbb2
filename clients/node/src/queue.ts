/**
 * UpdateQueue is the buffer behind Turn.updates: the connection pushes
 * each session/update of the turn as it arrives (wire order, which is
 * `seq` order: docs/protocol.md §6), and one consumer iterates them. It
 * holds everything until read, so a consumer that starts late loses
 * nothing; `end()` (the turn's answer arrived) lets the iteration finish
 * once the buffer is drained.
 */
export class UpdateQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: ((r: IteratorResult<T>) => void) | undefined;
  private ended = false;
  private iterated = false;

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
  }

  /** end marks the last item: iteration finishes after the buffer drains. */
  end(): void {
    this.ended = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ value: undefined, done: true });
    }
  }

  /** One iteration only: a second `for await` gets a TypeError. */
  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterated) throw new TypeError("a turn's updates can be iterated once");
    this.iterated = true;
    return {
      next: () => {
        const item = this.items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiter = resolve;
        });
      },
      return: () => {
        // The consumer stopped early (break, or a pending next() given up):
        // drop what is left and finish a next() still waiting.
        this.items.length = 0;
        this.end();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
