package client

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The sidecar answers a frame it cannot use with an error whose id is
// null (docs/protocol.md §3, Bad frames), which no pending request can be
// matched to: a request sent in such a frame would wait forever. This
// package therefore refuses, before anything is written, every frame the
// sidecar would refuse that way and that this package could produce: an
// empty method, params that are not an object or an array, and a frame
// longer than the sidecar's limit (initialize capabilities.maxFrameBytes).
// These refusals are *Error values with the Code and DataCode the sidecar
// would have sent (docs/protocol.md §5: -32600 INVALID_REQUEST) and Data
// nil; see Error.

// codeInvalidRequest is JSON-RPC -32600 (docs/protocol.md §5).
const codeInvalidRequest = protocol.CodeInvalidRequest

// dataCodeInvalidRequest is the data.code of -32600 (docs/protocol.md §5).
const dataCodeInvalidRequest = string(protocol.ErrInvalidRequest)

// frameTooLarge is returned by lineStream.WriteObject for a message over
// the sidecar's frame limit; nothing was written.
type frameTooLarge struct{ size, limit int64 }

func (e *frameTooLarge) Error() string {
	return fmt.Sprintf("the frame is %d bytes, over the sidecar's frame limit of %d bytes (capabilities.maxFrameBytes, --max-frame-bytes); it was not sent", e.size, e.limit)
}

func invalidRequest(method, format string, args ...any) *Error {
	return &Error{Code: codeInvalidRequest, DataCode: dataCodeInvalidRequest, Message: fmt.Sprintf(format, args...), method: method}
}

// encodeParams checks method and marshals params as a request's or a
// notification's params (docs/protocol.md §3: an object or an array; null
// and absent mean {}). It returns nil for absent params (nil, or a value
// that marshals to null), else the JSON to send.
func encodeParams(method string, params any) (json.RawMessage, error) {
	if method == "" {
		return nil, invalidRequest(method, "the method is empty (docs/protocol.md §3: method must be a non-empty string); nothing was sent")
	}
	if params == nil {
		return nil, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, &Error{Code: codeInvalidRequest, DataCode: dataCodeInvalidRequest, Message: fmt.Sprintf("the params cannot be encoded as JSON: %v; nothing was sent", err), method: method, cause: err}
	}
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil, nil
	case len(b) > 0 && (b[0] == '{' || b[0] == '['):
		return b, nil
	}
	return nil, invalidRequest(method, "params must be an object or array (docs/protocol.md §3), not %s; nothing was sent", jsonKind(b))
}

// jsonKind names the kind of the JSON value b for an error message.
func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '"':
		return "a string"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// sendParams is what dispatch and Notify pass to jsonrpc2: nil (no params
// member) or the checked JSON.
func sendParams(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return raw
}
