package client

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// The session/update fast path (docs/architecture.md, "Host clients").
// The read loop (lineStream.ReadObject) hands every line to router.take
// before jsonrpc2 sees it. A session/update notification is validated and
// split in one pass by jsonl.Scan (the scanner the sidecar reads its
// agents' lines with: no reflection, no allocation), its four members are
// taken as the sidecar writes them (session, requestId, seq, update), and
// the Update goes to its turn's sink without being woken there; the
// sinks are woken once per read, at router.flush. A line the fast path
// cannot take exactly (escapes in a name or a string, more than 8 params
// members, an id, a method other than session/update) goes the general
// way: encoding/json, jsonrpc2 and handler.Handle, with the same result.

// router routes session/update notifications to turn sinks and
// Options.OnUpdate. It is used on the read loop only.
type router struct {
	c     *Client
	env   jsonl.Envelope
	dirty []*turnSink // sinks added to since the last flush
	// The last session and requestId read, to share their strings, and
	// the sink of that pair (nil: none or not looked up).
	session, requestID string
	sink               *turnSink
}

// take implements lineStream.updates.
func (r *router) take(line []byte) bool {
	e := &r.env
	if !jsonl.Scan(line, e) || e.ID != nil || string(e.Method) != `"session/update"` || len(e.Params) == 0 || e.Params[0] != '{' {
		return false
	}
	var u Update
	if !e.Plain() || !r.decode(e, &u) {
		u = Update{}
		if json.Unmarshal(e.Params, &u) != nil {
			return true // not an update: dropped, as handler.Handle drops it
		}
	}
	r.route(u)
	return true
}

// decode fills u from e's params as encoding/json would, and returns false
// where it might not (then decode the params instead).
func (r *router) decode(e *jsonl.Envelope, u *Update) bool {
	sess, ok := plainString(e.Param("session"))
	if !ok {
		return false
	}
	if string(sess) != r.session {
		r.session, r.sink = string(sess), nil
	}
	u.Session = r.session
	if rid := e.Param("requestId"); rid != nil && string(rid) != "null" {
		v, ok := plainString(rid)
		if !ok {
			return false
		}
		if string(v) != r.requestID {
			r.requestID, r.sink = string(v), nil
		}
		s := r.requestID
		u.RequestID = &s
	}
	if seq := e.Param("seq"); seq != nil {
		n, err := strconv.ParseUint(string(seq), 10, 64)
		if err != nil {
			return false
		}
		u.Seq = n
	}
	if upd := e.Param("update"); upd != nil {
		u.Update = json.RawMessage(bytes.Clone(upd))
	}
	return true
}

// plainString is the contents of a raw JSON string that decodes to itself:
// no escapes, valid UTF-8.
func plainString(raw []byte) ([]byte, bool) {
	s, ok := jsonl.StringValue(raw)
	return s, ok && utf8.Valid(s)
}

// route hands u to the sink of its turn, else to Options.OnUpdate.
func (r *router) route(u Update) {
	c := r.c
	if u.RequestID != nil {
		sink := r.sinkFor(u.Session, *u.RequestID)
		if sink != nil && !sink.add(u) {
			// Closed: its Prompt has returned, and another may have
			// registered the key since.
			r.sink = nil
			if sink = r.sinkFor(u.Session, *u.RequestID); sink != nil && !sink.add(u) {
				sink = nil
			}
		}
		if sink != nil {
			if !sink.dirty {
				sink.dirty = true
				r.dirty = append(r.dirty, sink)
			}
			return
		}
	}
	if f := c.opts.OnUpdate; f != nil {
		c.cb.events.push(func() { f(u) })
	}
}

// sinkFor is the registered sink of a turn, or nil; the one of the last
// session and requestId read is kept.
func (r *router) sinkFor(session, requestID string) *turnSink {
	last := session == r.session && requestID == r.requestID
	if last && r.sink != nil {
		return r.sink
	}
	r.c.subs.mu.Lock()
	sink := r.c.subs.turns[turnKey{session, requestID}]
	r.c.subs.mu.Unlock()
	if last {
		r.sink = sink
	}
	return sink
}

// flush implements lineStream.flush: it wakes every sink added to.
func (r *router) flush() {
	for i, s := range r.dirty {
		s.dirty = false
		s.notify()
		r.dirty[i] = nil
	}
	r.dirty = r.dirty[:0]
}

// turnSink collects one turn's updates for Prompt, which delivers them on
// the caller's goroutine. The read loop adds (add) and wakes it once per
// read (notify); Prompt takes what came (take) and, when it returns,
// closes it (endTurn).
type turnSink struct {
	mu     sync.Mutex
	ups    []Update
	closed bool
	wake   chan struct{}
	dirty  bool // read loop only: added to since the last flush
}

func newTurnSink() *turnSink { return &turnSink{wake: make(chan struct{}, 1)} }

// add appends u; false once the sink is closed.
func (s *turnSink) add(u Update) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.ups = append(s.ups, u)
	return true
}

func (s *turnSink) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns what was added since the last take (the caller's to keep).
func (s *turnSink) take() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	ups := s.ups
	s.ups = nil
	return ups
}

// endTurn removes sink (registered under key) and closes it; updates that
// reached it after Prompt's last take go to Options.OnUpdate.
func (c *Client) endTurn(key turnKey, sink *turnSink) {
	c.subs.mu.Lock()
	if c.subs.turns[key] == sink {
		delete(c.subs.turns, key)
	}
	c.subs.mu.Unlock()
	sink.mu.Lock()
	sink.closed = true
	left := sink.ups
	sink.ups = nil
	sink.mu.Unlock()
	if f := c.opts.OnUpdate; f != nil && len(left) > 0 {
		c.cb.events.push(func() {
			for _, u := range left {
				f(u)
			}
		})
	}
}
