package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"
)

// Data codes of errors this package makes itself, never sent by the
// sidecar. Such errors have Code 0 and Data nil.
const (
	// DataCodeTransport: the request could not be sent or its answer never
	// came: the sidecar's pipes are closed or the process has exited. Not
	// retryable on this Client.
	DataCodeTransport = "TRANSPORT"
	// DataCodeCancelled: the call's context ended first (Unwrap gives
	// context.Canceled or context.DeadlineExceeded). The sidecar was sent
	// $/cancelRequest for the request.
	DataCodeCancelled = "CANCELLED"
	// DataCodeBadResult: the sidecar answered with a result this package
	// could not decode (a version mismatch).
	DataCodeBadResult = "BAD_RESULT"
	// DataCodeStart: Start could not launch the sidecar or was given bad
	// Options.
	DataCodeStart = "START_FAILED"
	// DataCodeExitStatus: Shutdown or Close saw the sidecar exit with a
	// status other than 0 (1: some cleanup proof was not complete); see
	// Client.ExitCode.
	DataCodeExitStatus = "EXIT_STATUS"
	// DataCodeSessionEnded: Session.WaitLifecycle saw the session end
	// (closed, its provider exited, SESSION_LOST, shutdown) before the
	// state it waited for (docs/protocol.md §24).
	DataCodeSessionEnded = "SESSION_ENDED"
)

// Error is every error this package returns. For an error the sidecar
// sent (docs/protocol.md §5), Code is its JSON-RPC code (-32000 for domain
// failures, -32602 for bad params, …), DataCode its stable data.code
// (SESSION_NOT_FOUND, INVALID_PARAMS, …) and Data the whole data member
// verbatim. Errors made by this package have Code 0 and one of the
// DataCode* constants, except one kind: a request or notification the
// sidecar would refuse as a bad frame (docs/protocol.md §3: answered with
// id null, so its caller would wait forever) is refused here, before any
// byte is written, with the error the sidecar would send, Code -32600 and
// DataCode "INVALID_REQUEST", and Data nil. That is a frame over the
// sidecar's frame limit (initialize capabilities.maxFrameBytes; Message
// names the frame's size and the limit, e.g. a Prompt of a too long
// prompt), params that do not marshal to a JSON object, array or null,
// and an empty method. The connection is unaffected. Switch on DataCode,
// not on Message.
type Error struct {
	// Code is the JSON-RPC error code: the sidecar's, -32600 for a frame
	// refused before sending, else 0.
	Code int
	// Message is the error's text, for people; never switch on it.
	Message string
	// DataCode is the sidecar's stable data.code, or one of the DataCode*
	// constants for an error made by this package.
	DataCode string
	// Data is the error's whole data member verbatim (nil for errors made
	// by this package).
	Data json.RawMessage

	method string
	cause  error
}

// Error implements error: "<method>: <DataCode> (<Code>): <Message>".
func (e *Error) Error() string {
	s := e.DataCode
	if e.Code != 0 {
		s = fmt.Sprintf("%s (%d)", s, e.Code)
	}
	if e.method != "" {
		s = e.method + ": " + s
	}
	return "acpx-sidecar client: " + s + ": " + e.Message
}

// Unwrap returns the underlying cause of an error made by this package
// (a context error, an I/O error), or nil.
func (e *Error) Unwrap() error { return e.cause }

// errorData is the part of data this package reads.
type errorData struct {
	Code      string   `json:"code"`
	Retryable bool     `json:"retryable"`
	Field     string   `json:"field"`
	Paths     []string `json:"paths"`
	Cleanup   *Proof   `json:"cleanup"`
	Proof     *Proof   `json:"proof"`
}

func (e *Error) data() errorData {
	var d errorData
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &d)
	}
	return d
}

// Retryable reports data.retryable: the same request may succeed later
// unchanged. False for errors made by this package.
func (e *Error) Retryable() bool { return e.data().Retryable }

// Field is data.field of a -32602 error: the dot path of the first bad
// parameter ("command.path", "env.FOO"), or "".
func (e *Error) Field() string { return e.data().Field }

// Paths is data.paths of a SANDBOX_CONFLICT: the paths the sidecar keeps
// from agents that the open's sandbox would have exposed (docs/protocol.md
// §19); nil for other errors.
func (e *Error) Paths() []string { return e.data().Paths }

// Proof returns the cleanup proof an error carries: data.cleanup of a
// failed session/open, or data.proof of CLEANUP_INCOMPLETE; nil if none.
func (e *Error) Proof() *Proof {
	d := e.data()
	if d.Cleanup != nil {
		return d.Cleanup
	}
	return d.Proof
}

func newError(method, dataCode string, cause error, format string, args ...any) *Error {
	return &Error{DataCode: dataCode, Message: fmt.Sprintf(format, args...), method: method, cause: cause}
}

// convert turns an error from the jsonrpc2 layer or a context into *Error.
func convert(method string, err error) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	var fe *frameTooLarge
	if errors.As(err, &fe) {
		return invalidRequest(method, "%s", fe.Error())
	}
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		e := &Error{Code: int(re.Code), Message: re.Message, method: method}
		if re.Data != nil {
			e.Data = append(json.RawMessage(nil), *re.Data...)
			e.DataCode = e.data().Code
		}
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return newError(method, DataCodeCancelled, err, "%v", err)
	}
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return newError(method, DataCodeTransport, err, "the connection to the sidecar is closed")
	}
	return newError(method, DataCodeTransport, err, "%v", err)
}
