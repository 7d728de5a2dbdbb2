package jsonl

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// CheckMessage checks that frame (non-empty, white space trimmed, as
// ReadFrame returns it) is one JSON-RPC 2.0 message that
// sourcegraph/jsonrpc2 can take without ending its connection. It returns
// nil or a *FrameError of kind Malformed, Batch, NotObject, Invalid or
// NullResponse, whose Reason is the sentence docs/protocol.md lists under
// "Bad frames".
//
// A response is checked less than a request (only that it has an id):
// responses are never answered, and a bad one is left for the connection
// to drop.
func CheckMessage(frame []byte) error {
	if len(frame) == 0 {
		return bad(Malformed, "malformed JSON")
	}
	if frame[0] == '[' {
		if json.Valid(frame) {
			return bad(Batch, "batches are not supported")
		}
		return bad(Malformed, "malformed JSON")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(frame, &m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && strings.Contains(syn.Error(), "exceeded max depth") {
			// Valid JSON, but deeper than encoding/json reads (found by a
			// fresh-user trial: it was called malformed).
			return bad(Malformed, "JSON nested deeper than 10000 levels")
		}
		if errors.As(err, &syn) || !json.Valid(frame) {
			return bad(Malformed, "malformed JSON")
		}
		return bad(NotObject, "a message must be a JSON object")
	}
	if k := duplicateEnvelopeMember(frame); k != "" {
		// encoding/json keeps the last of two, other readers the first:
		// which request or answer this is would depend on the reader.
		return bad(Invalid, "member "+strconv.Quote(k)+" occurs twice")
	}
	for k := range m {
		if envelopeCaseVariant(k) {
			// encoding/json (and so jsonrpc2) would take it for the member
			// it differs from only by case; JSON-RPC's names are exact.
			return bad(Invalid, "member names are case-sensitive")
		}
	}
	rawID, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	if hasID && string(rawID) == "null" && (hasResult || hasError) {
		return bad(NullResponse, "response with id null")
	}
	if hasID {
		switch {
		case isUintID(rawID), len(rawID) > 0 && rawID[0] == '"':
		default:
			return bad(Invalid, "id must be a string or a non-negative integer")
		}
	}
	if v, ok := m["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return bad(Invalid, `jsonrpc must be "2.0"`)
	}
	method, hasMethod := m["method"]
	switch {
	case hasMethod:
		var name string
		if json.Unmarshal(method, &name) != nil || name == "" {
			return bad(Invalid, "method must be a non-empty string")
		}
		if hasResult || hasError {
			return bad(Invalid, "a message cannot be both request and response")
		}
		if p, ok := m["params"]; ok && len(p) > 0 && p[0] != '{' && p[0] != '[' && string(p) != "null" {
			return bad(Invalid, "params must be an object or array")
		}
	case hasResult && hasError:
		return bad(Invalid, "a response cannot carry both result and error")
	case hasResult || hasError:
		if !hasID {
			return bad(Invalid, "a response needs an id")
		}
		// Returning nil lets jsonrpc2 match the response to its call.
	default:
		return bad(Invalid, "not a request or response")
	}
	return nil
}

// envelopeCaseVariant reports whether key differs from a JSON-RPC member
// name only by case ("ID", "Result").
func envelopeCaseVariant(key string) bool {
	for _, name := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
		if key != name && len(key) == len(name) && strings.EqualFold(key, name) {
			return true
		}
	}
	return false
}

func bad(k Kind, reason string) *FrameError { return &FrameError{Kind: k, Reason: reason} }

// isUintID reports whether raw is an integer id jsonrpc2 can hold:
// 0 … 2^63−1 in plain decimal (jsonrpc2 v0.2.3 keeps numeric ids in an
// int64).
func isUintID(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return false
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// duplicateEnvelopeMember returns a JSON-RPC envelope member name (jsonrpc,
// id, method, params, result, error) that obj, a valid JSON object, names
// twice (escapes decoded), or "".
func duplicateEnvelopeMember(obj []byte) string {
	var seen [6]bool
	dup := ""
	Members(obj, func(key []byte, escaped bool, _ []byte) {
		k := MemberName(key, escaped)
		for i, name := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
			if k == name {
				if seen[i] && dup == "" {
					dup = name
				}
				seen[i] = true
			}
		}
	})
	return dup
}
