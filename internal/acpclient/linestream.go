package acpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

// lineStream is the jsonrpc2.ObjectStream over one provider's stdio: NDJSON
// frames read and written by internal/jsonl. A bad frame (an agent's log
// line on stdout, a line over the limit, anything that is not one JSON-RPC
// 2.0 message) is dropped: never answered, never fatal, and reported to
// onDrop only by its *jsonl.FrameError, which carries no line content.
//
// ACP session/update notifications, the bulk of a turn, never reach
// jsonrpc2: ReadObject hands them to onUpdates straight from the line (one
// jsonl.Scan pass validates the line and finds `update`; its bytes are a
// subslice of the line, never decoded), in wire order, on the read loop
// (docs/architecture.md, "Update path"). Updates that arrived together
// (their lines already buffered) go as one batch, at most maxBatch updates
// or maxBatchBytes; a batch is handed over before the read loop would wait
// for the provider and before any other message. A batch's lines after its
// first are read into one reused buffer (a Slab, which goes to the
// actor with the batch and comes back once handled), so a burst of updates
// costs no allocation per line. An update that is not an
// ACP SessionUpdate (no non-empty string sessionUpdate) is dropped and
// reported to onBadUpdate; one whose frame held bytes a host must never
// see verbatim (jsonl.Envelope.NeedsClean) is cleaned first. Anything the
// scan cannot take exactly (an escaped key, a non-object update) goes the
// ordinary way, where it is decoded strictly (decodeUpdateParams).
type lineStream struct {
	in     *jsonl.Reader
	out    *jsonl.Writer
	closer io.Closer
	onDrop func(*jsonl.FrameError) // may be nil
	// onUpdates receives batches of session/updates in wire order; the
	// callee calls the batch's release once it has handled them (their
	// bytes are not to be kept past that). nil = no fast path.
	onUpdates func(*Slab)
	// onBadUpdate is told (never the content) of each session/update the
	// fast path dropped; nil = not told.
	onBadUpdate func(why string)
	env         jsonl.Envelope
	// frame is the last frame ReadObject handed to jsonrpc2: its handler
	// runs on the read loop before the next ReadObject, and decodes the
	// params the policy depends on from these bytes (jsonrpc2 re-encodes
	// a request's params through a map, merging duplicate members).
	frame     []byte
	batch     *Slab // the batch being gathered, nil if none
	batchSize int   // bytes of the updates in batch
	// pacer, if the stream reads a paced pipe (pipepoll_linux.go), is told
	// whether the read loop is taking a stream of updates.
	pacer interface{ setPacing(bool) }
}

// Batch bounds of lineStream.
const (
	maxBatch      = 128
	maxBatchBytes = 1 << 20
)

// Slab is one batch of updates and the buffer holding the lines of
// all but its first (its updates' bytes are subslices of buf or of a line
// of their own). The actor calls Release once it has handled the batch;
// the slab then serves a later batch of any session (slabPool), so idle
// sessions hold none.
type Slab struct {
	buf []byte
	ups []Update
}

// slabBytes is a Slab's buffer: room for maxBatch lines of ~500 bytes.
// A batch is handed over once less than slabSpare is left.
const (
	slabBytes = 64 << 10
	slabSpare = 8 << 10
)

var slabPool = sync.Pool{New: func() any { return &Slab{buf: make([]byte, 0, slabBytes)} }}

// Release returns sl to the pool; nothing of it (nor of the Updates it
// held) may be used afterwards.
func (sl *Slab) Release() {
	clear(sl.ups)
	sl.ups, sl.buf = sl.ups[:0], sl.buf[:0]
	slabPool.Put(sl)
}

// Update is one ACP session/update. Its bytes are the agent's: valid
// only until its Event's Batch is released (copy what is kept).
type Update struct {
	// BackendSessionID is params.sessionId's contents (nil if absent).
	BackendSessionID []byte
	// Update is params.update, verbatim but for what jsonl.Clean rewrites:
	// a JSON object whose sessionUpdate is a non-empty string.
	Update json.RawMessage
	// Kind is that sessionUpdate as one of the kinds the actor keeps
	// state from.
	Kind UpdateKind
}

// UpdateKind is an update's sessionUpdate as far as the actor cares
// (internal/session's Actor.trackUpdate): the kinds it keeps state from, else
// KindOther.
type UpdateKind uint8

// The UpdateKinds: ACP SessionUpdate's sessionUpdate values tool_call,
// tool_call_update, current_mode_update, config_option_update,
// usage_update, and any other (KindOther).
const (
	KindOther UpdateKind = iota
	KindToolCall
	KindToolCallUpdate
	KindModeUpdate
	KindConfigUpdate
	KindUsageUpdate
)

// KindOf maps a sessionUpdate value (its string's contents, unquoted) to
// its UpdateKind.
func KindOf(sessionUpdate []byte) UpdateKind {
	switch string(sessionUpdate) {
	case "tool_call":
		return KindToolCall
	case "tool_call_update":
		return KindToolCallUpdate
	case "current_mode_update":
		return KindModeUpdate
	case "config_option_update":
		return KindConfigUpdate
	case "usage_update":
		return KindUsageUpdate
	}
	return KindOther
}

// newLineStream reads r and writes w as NDJSON; maxLine bounds one inbound
// line in bytes (≤ 0 means jsonl.DefaultMaxFrameBytes). closer (may be nil)
// is closed by Close.
func newLineStream(r io.Reader, w io.Writer, closer io.Closer, maxLine int, onDrop func(*jsonl.FrameError)) *lineStream {
	st := &lineStream{in: jsonl.NewReader(r, jsonl.NDJSON, maxLine), out: jsonl.NewWriter(w, jsonl.NDJSON),
		closer: closer, onDrop: onDrop}
	st.pacer, _ = r.(interface{ setPacing(bool) })
	return st
}

// ReadObject reads lines until one is a JSON-RPC 2.0 message other than a
// session/update taken by onUpdate, and unmarshals it into v, dropping bad
// lines. It returns the read error (io.EOF) when the provider's stdout
// ends.
func (s *lineStream) ReadObject(v interface{}) error {
	for {
		var frame []byte
		var err error
		start := -1
		if s.batch != nil {
			// Within a burst: the line goes into the batch's buffer.
			start = len(s.batch.buf)
			s.batch.buf, frame, err = s.in.ReadFrameTo(s.batch.buf)
		} else {
			frame, err = s.in.ReadFrame()
		}
		if err == nil {
			if s.onUpdates != nil && s.takeUpdate(frame) {
				// (A dropped update, the first of a burst, leaves no batch.)
				if b := s.batch; b != nil && (len(b.ups) >= maxBatch || s.batchSize >= maxBatchBytes ||
					cap(b.buf)-len(b.buf) < slabSpare || !s.in.LineReady()) {
					s.flush()
				}
				s.setPacing(true)
				continue
			}
			if start >= 0 && len(s.batch.buf) > start {
				// Not an update: it leaves the batch's buffer, which is
				// reused once the batch is handled.
				frame = bytes.Clone(frame)
				s.batch.buf = s.batch.buf[:start]
			}
			s.setPacing(false)
			s.flush()
			s.frame = frame
			err = jsonl.DecodeMessage(frame, v)
		} else {
			s.flush()
		}
		if err == nil {
			return nil
		}
		var fe *jsonl.FrameError
		if !errors.As(err, &fe) {
			return err
		}
		if s.onDrop != nil {
			s.onDrop(fe)
		}
	}
}

func (s *lineStream) setPacing(on bool) {
	if s.pacer != nil {
		s.pacer.setPacing(on)
	}
}

// flush hands the batch to onUpdates.
func (s *lineStream) flush() {
	if b := s.batch; b != nil {
		s.batch, s.batchSize = nil, 0
		if len(b.ups) == 0 {
			b.Release()
			return
		}
		s.onUpdates(b)
	}
}

// takeUpdate adds frame to the batch if it is a well-formed ACP
// session/update notification that the scan read exactly, or drops it
// (onBadUpdate) when its update is an object without a non-empty string
// sessionUpdate; either way it reports the frame taken.
func (s *lineStream) takeUpdate(frame []byte) bool {
	e := &s.env
	if !jsonl.Scan(frame, e) || !e.Plain() || e.ID != nil || e.Result != nil || e.Error != nil ||
		string(e.JSONRPC) != `"2.0"` || string(e.Method) != `"session/update"` {
		return false
	}
	up := e.Param("update")
	if len(up) == 0 || up[0] != '{' {
		return false
	}
	var sid []byte
	if raw := e.Param("sessionId"); raw != nil {
		var ok bool
		if sid, ok = jsonl.StringValue(raw); !ok {
			return false
		}
	}
	kindRaw := e.UpdateKind()
	kind, ok := jsonl.StringValue(kindRaw)
	switch {
	case !ok && len(kindRaw) > 0 && kindRaw[0] == '"':
		return false // an escaped sessionUpdate: decode it
	case !ok || len(kind) == 0:
		if s.onBadUpdate != nil {
			s.onBadUpdate("update has no non-empty string sessionUpdate")
		}
		return true
	}
	if e.NeedsClean() {
		up = jsonl.Clean(make([]byte, 0, len(up)+8), up)
	}
	if s.batch == nil {
		s.batch = slabPool.Get().(*Slab)
	}
	s.batch.ups = append(s.batch.ups, Update{BackendSessionID: sid, Update: up, Kind: KindOf(kind)})
	s.batchSize += len(up)
	return true
}

// lastFrame returns the frame of the message jsonrpc2 is handling (see
// lineStream.frame). Call it only from the connection's handler.
func (s *lineStream) lastFrame() []byte { return s.frame }

// WriteObject writes v as one line; writes are serialized.
func (s *lineStream) WriteObject(v interface{}) error { return s.out.WriteObject(v) }

// Close closes the closer, if any.
func (s *lineStream) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}
