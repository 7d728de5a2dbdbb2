package jsonl

import "unicode/utf8"

// One-pass envelope scan: Scan validates a frame as JSON and, in the same
// pass, records where the top-level members of the JSON-RPC envelope and
// the members of its params object are, so a forwarder can take a value
// (an ACP session/update's `update`) as bytes without decoding it
// (docs/architecture.md, "Update path"). The same pass notes what must
// not reach a host verbatim — a string byte that is not UTF-8, a control
// byte (tab, CR, LF) between tokens — so the forwarder rewrites the value
// (Clean) only when the agent sent such bytes; and it records the update's
// own `sessionUpdate` member, so an update that is not an ACP
// SessionUpdate is known without a second look (docs/protocol.md,
// "Threat model").

// maxParams bounds the params members an Envelope records.
const maxParams = 8

// Envelope is a JSON-RPC message as Scan saw it: each field is the raw
// bytes of that top-level member's value (a subslice of the frame; nil when
// absent). The last occurrence of a duplicated member wins, as in
// encoding/json.
type Envelope struct {
	// JSONRPC, ID, Method, Params, Result and Error are the raw values of
	// the members "jsonrpc", "id", "method", "params", "result" and
	// "error", strings still quoted; nil when absent.
	JSONRPC, ID, Method, Params, Result, Error []byte

	params  [maxParams]rawMember
	nParams int
	// complex: a key had an escape, or params had more than maxParams
	// members: member lookup is not exact, use a decoder.
	complex bool
	// dirty: a string held a byte sequence that is not UTF-8, or a tab,
	// CR or LF stood between tokens (Clean rewrites both).
	dirty bool
	// updKind is the raw value of params.update.sessionUpdate (nil when
	// params.update is not an object or has no such member).
	updKind []byte
}

// NeedsClean reports whether the frame held bytes a host must never get
// verbatim: a string byte sequence that is not valid UTF-8, or a control
// byte (tab, CR, LF) between tokens. A value taken from such a frame goes
// through Clean first.
func (e *Envelope) NeedsClean() bool { return e.dirty }

// UpdateKind returns the raw value of params.update.sessionUpdate, the
// last occurrence (nil when params.update is not an object or has none);
// exact only when Plain (an escaped key makes the envelope complex).
func (e *Envelope) UpdateKind() []byte { return e.updKind }

type rawMember struct{ key, val []byte } // key without quotes

// Plain reports whether every member was recorded exactly (no key with an
// escape sequence, at most 8 params members): only then do Param's nil
// results mean "absent".
func (e *Envelope) Plain() bool { return !e.complex }

// Param returns the raw value of params.name (params an object), nil if
// absent (see Plain).
func (e *Envelope) Param(name string) []byte {
	var v []byte
	for i := 0; i < e.nParams; i++ {
		if string(e.params[i].key) == name {
			v = e.params[i].val
		}
	}
	return v
}

// StringValue returns the contents of a raw JSON string without its
// quotes, and false if raw is not a string or has escape sequences (then
// decode it instead).
func StringValue(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c == '\\' {
			return nil, false
		}
	}
	return s, true
}

// Scan validates frame (one JSON value, surrounding white space allowed)
// and fills e when it is an object. It returns false if frame is not valid
// JSON or not an object; e is then unspecified. It allocates nothing.
func Scan(frame []byte, e *Envelope) bool {
	*e = Envelope{}
	s := scanner{b: frame}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	if !s.object(1, e, membersEnvelope) {
		return false
	}
	s.ws()
	e.dirty = s.dirty
	return s.i == len(s.b)
}

type scanner struct {
	b []byte
	i int
	// dirty: a non-UTF-8 string byte or a control byte between tokens
	// was seen (Envelope.NeedsClean).
	dirty bool
}

// maxDepth bounds nesting (encoding/json allows 10000).
const maxDepth = 10000

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ':
			s.i++
		case '\t', '\n', '\r':
			s.dirty = true // a host splitting lines on CR must never see one
			s.i++
		default:
			return
		}
	}
}

// value scans one value at s.i (white space skipped before it).
func (s *scanner) value(depth int) bool {
	s.ws()
	if s.i >= len(s.b) || depth > maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth+1, nil, membersIgnored)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.num()
	}
	return false
}

// What an object's members are recorded as (scanner.object).
const (
	membersIgnored  = iota // a nested value: validated only
	membersEnvelope        // the message: Envelope's fields
	membersParams          // its "params" object: Envelope.params
	membersUpdate          // params.update: its sessionUpdate member
)

// memberKey reads one object member's `"key" :` (with the white space
// around it) and leaves s at its value: the key's raw bytes (between the
// quotes), whether it holds an escape, and false for anything else.
func (s *scanner) memberKey() (key []byte, escaped, ok bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	kstart := s.i
	if escaped, ok = s.str(); !ok {
		return nil, false, false
	}
	key = s.b[kstart+1 : s.i-1]
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, false, false
	}
	s.i++
	s.ws()
	return key, escaped, true
}

// object scans an object at s.i ('{'), recording its members in e as role
// says; the envelope's "params" object is scanned as membersParams.
func (s *scanner) object(depth int, e *Envelope, role int) bool {
	if role == membersParams {
		e.nParams = 0
	}
	if s.open('}') {
		return true
	}
	for {
		// memberKey, written out: this loop runs for every member of every
		// update, and the call (too large to inline) cost ~10% of the scan
		// in BenchmarkScan.
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		kstart := s.i
		escaped, ok := s.str()
		if !ok {
			return false
		}
		key := s.b[kstart+1 : s.i-1]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		vstart := s.i
		var okv bool
		switch {
		case role == membersEnvelope && !escaped && string(key) == "params" && s.i < len(s.b) && s.b[s.i] == '{':
			okv = s.object(depth+1, e, membersParams)
		case role == membersParams && !escaped && string(key) == "update":
			e.updKind = nil // the last "update" decides
			if s.i < len(s.b) && s.b[s.i] == '{' {
				okv = s.object(depth+1, e, membersUpdate)
			} else {
				okv = s.value(depth)
			}
		default:
			okv = s.value(depth)
		}
		if !okv {
			return false
		}
		switch {
		case role == membersIgnored:
		case escaped || (role == membersParams && e.nParams == maxParams):
			e.complex = true
		case role == membersUpdate:
			if string(key) == "sessionUpdate" {
				e.updKind = s.b[vstart:s.i]
			}
		case role == membersEnvelope:
			e.set(key, s.b[vstart:s.i])
		default:
			e.params[e.nParams] = rawMember{key: key, val: s.b[vstart:s.i]}
			e.nParams++
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// set records an envelope member's raw value in its field (others are
// ignored). The cases only look alike: one a field, none shareable.
func (e *Envelope) set(key, val []byte) {
	switch string(key) {
	case "jsonrpc":
		e.JSONRPC = val
	case "id":
		e.ID = val
	case "method":
		e.Method = val
	case "params":
		e.Params = val
	case "result":
		e.Result = val
	case "error":
		e.Error = val
	}
}

func (s *scanner) array(depth int) bool {
	if s.open(']') {
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// open steps over the '{' or '[' at s.i and the white space after it,
// and reports an empty object or array (its closing end read too).
// Object, array and Members share it.
func (s *scanner) open(end byte) (empty bool) {
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		return true
	}
	return false
}

// next reads what follows a member or an element (white space skipped
// before it): ',' (more: another follows) or end, the closing '}' or ']'
// (ok: the object or array is complete); anything else, or the end of
// the input, is neither. Object, array and Members share it.
func (s *scanner) next(end byte) (more, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	c := s.b[s.i]
	s.i++
	return c == ',', c == ',' || c == end
}

// str scans a string at s.i ('"'); escaped reports an escape sequence.
// Control characters are invalid; bytes ≥ 0x80 pass (as encoding/json.Valid
// accepts them), and one that does not begin a valid UTF-8 sequence marks
// the scan dirty.
func (s *scanner) str() (escaped, ok bool) {
	s.i++ // '"'
	for s.i < len(s.b) {
		// The bulk of a string: bytes that need no look (a tight loop).
		i, b := s.i, s.b
		for i < len(b) && plainStringByte[b[i]] {
			i++
		}
		if s.i = i; i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			s.i++
			return escaped, true
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return escaped, false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.b) {
					return escaped, false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return escaped, false
					}
				}
				s.i += 5
			default:
				return escaped, false
			}
		case c < 0x20:
			return escaped, false
		case c >= utf8.RuneSelf:
			// Multi-byte text: valid sequences pass whole; a byte that
			// does not begin one is skipped alone and marks the scan.
			if r, n := utf8.DecodeRune(b[i:]); r == utf8.RuneError && n == 1 {
				s.dirty = true
				s.i++
			} else {
				s.i += n
			}
		default:
			s.i++
		}
	}
	return escaped, false
}

// plainStringByte[c]: c inside a JSON string is itself and ASCII (not
// '"', '\\', a control character or the start of a multi-byte sequence).
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// num scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) num() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
