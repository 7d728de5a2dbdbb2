package actor

import "sync"

// Reply answers one host command: result is the command's result (nil on
// error), err its error. It is exactly session.Reply's func type.
type Reply = func(result any, err error)

// Mailbox holds the host commands for one actor in arrival order. Put
// never blocks; the actor takes one command per wake-up (Ready), so
// provider events keep their share of its loop. Commands still queued when
// the actor stops are handed back by Close, for their replies to be
// answered (the session answers SESSION_NOT_FOUND). The zero value is not
// usable; make one with NewMailbox.
type Mailbox struct {
	mu     sync.Mutex
	q      []mailItem
	closed bool
	ready  chan struct{} // one token while q is not empty
}

// mailItem is one command and the reply it answers if it never runs.
type mailItem struct {
	fn    func()
	reply Reply
}

// NewMailbox returns an empty, open Mailbox.
func NewMailbox() *Mailbox { return &Mailbox{ready: make(chan struct{}, 1)} }

// Put queues fn, with the reply it answers if it never runs; false if the
// mailbox is closed (fn will never run, reply is not kept). It never
// blocks.
func (mb *Mailbox) Put(reply Reply, fn func()) bool {
	mb.mu.Lock()
	if mb.closed {
		mb.mu.Unlock()
		return false
	}
	mb.q = append(mb.q, mailItem{fn: fn, reply: reply})
	mb.mu.Unlock()
	mb.signal()
	return true
}

func (mb *Mailbox) signal() {
	select {
	case mb.ready <- struct{}{}:
	default:
	}
}

// Ready has a token while commands are queued: the actor selects on it,
// then calls Take. A token may be stale (Take then returns nil).
func (mb *Mailbox) Ready() <-chan struct{} { return mb.ready }

// Take returns the oldest command, nil if none; it leaves the Ready token
// in place while more are queued.
func (mb *Mailbox) Take() func() {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if len(mb.q) == 0 {
		return nil
	}
	it := mb.q[0]
	mb.q[0] = mailItem{}
	mb.q = mb.q[1:]
	if len(mb.q) == 0 {
		mb.q = nil
	} else {
		mb.signal()
	}
	return it.fn
}

// Close refuses later Puts and returns the replies of the commands that
// will never run, in arrival order; the caller answers them.
func (mb *Mailbox) Close() []Reply {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.closed = true
	out := make([]Reply, 0, len(mb.q))
	for _, it := range mb.q {
		out = append(out, it.reply)
	}
	mb.q = nil
	return out
}

// OnceReply wraps reply so that only its first call counts (a bounded
// read answers from the snapshot, the actor's answer may follow). It is
// safe to call from several goroutines.
func OnceReply(reply Reply) Reply {
	var once sync.Once
	return func(r any, err error) { once.Do(func() { reply(r, err) }) }
}
