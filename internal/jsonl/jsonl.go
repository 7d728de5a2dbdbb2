// Package jsonl frames JSON-RPC 2.0 messages on a byte stream, for both
// ends of acpx-sidecar: the host's stdio (internal/rpc) and each provider's
// stdio (internal/acpclient).
//
// A Reader splits its input into frames — NDJSON lines or LSP
// Content-Length frames — and checks that each is one JSON-RPC 2.0 message
// (not a batch, not malformed, a valid envelope). A frame that cannot be
// used is consumed and reported as a *FrameError; the stream stays in sync
// and the next read returns the next frame, so one bad frame never ends a
// connection. What to do with a bad frame is the caller's decision: the
// host side answers it, the provider side drops it. A Writer writes frames,
// serialized, in the same two framings.
//
// The package imports nothing but the standard library.
package jsonl

import "strconv"

// Framing names a wire framing. The values are the spellings of the
// sidecar's --framing flag.
type Framing string

// The supported framings.
const (
	// NDJSON is one message per line, ended by "\n" ("\r\n" is accepted
	// on input; blank lines are skipped).
	NDJSON Framing = "ndjson"
	// LSP is "Content-Length: N\r\n\r\n" followed by N bytes of message, as
	// in the Language Server Protocol. Other header lines are ignored.
	LSP Framing = "lsp"
)

// DefaultMaxFrameBytes is the frame limit a Reader uses when it is given
// none (maxBytes ≤ 0): 16 MiB.
const DefaultMaxFrameBytes = 16 << 20

// Kind classifies a bad frame.
type Kind int

// The kinds of bad frame.
const (
	// Oversized: the frame is longer than the Reader's limit. Under NDJSON
	// the line was skipped without being stored; under LSP the error is
	// reported as soon as the header block is read, and the body (exactly
	// Content-Length bytes) is discarded by the next read.
	Oversized Kind = iota + 1
	// NoLength: an LSP header block without a valid Content-Length
	// (missing, not a number, negative). Its body, if any, cannot be
	// delimited; the Reader resynchronizes on the next "Content-Length:".
	NoLength
	// Malformed: the frame is not valid JSON.
	Malformed
	// Batch: the frame is a JSON array (a JSON-RPC batch).
	Batch
	// NotObject: the frame is valid JSON but not an object.
	NotObject
	// Invalid: the frame is a JSON object but not a valid JSON-RPC 2.0
	// message (bad jsonrpc, id, method or params, neither request nor
	// response, or not decodable into the caller's value).
	Invalid
	// NullResponse: a response with id null — the peer's answer to a frame
	// it could not parse. There is nothing to match it with and it must
	// never be answered.
	NullResponse
)

var kindNames = [...]string{
	Oversized:    "oversized",
	NoLength:     "no-length",
	Malformed:    "malformed",
	Batch:        "batch",
	NotObject:    "not-object",
	Invalid:      "invalid",
	NullResponse: "null-response",
}

// String returns the kind's lower-case name ("oversized", "malformed", …),
// or "kind(N)" for a value outside the constants.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// FrameError reports one bad frame. The frame is already consumed when it
// is returned: reading may go on. It never carries frame content, so it is
// safe to log.
type FrameError struct {
	// Kind classifies the frame.
	Kind Kind
	// Reason is a short human-readable sentence without frame content,
	// e.g. "malformed JSON" or "frame exceeds 1024 bytes". The host side
	// sends it as the error message (docs/protocol.md, "Bad frames").
	Reason string
	// Limit is the Reader's frame limit in bytes, set for Oversized.
	Limit int
	// Length is the declared Content-Length of an Oversized LSP frame, in
	// bytes; 0 otherwise (an oversized NDJSON line is not measured).
	Length int
}

// Error returns Reason.
func (e *FrameError) Error() string { return e.Reason }
