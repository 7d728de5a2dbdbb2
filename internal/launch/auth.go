package launch

import (
	"context"
	"encoding/json"
	"errors"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// The handshake's part of docs/protocol.md §23 that needs the open:
// its authMethod and the errors of a session-creating request.
// What the sidecar advertises, the session-creating request's params and
// the checks of the agent's capabilities before sending are
// internal/acpclient's (requests.go, caps.go).

// hostAuthenticate runs ACP authenticate for the open's authMethod.
// Errors are AUTH_FAILED: a method the agent does not offer, a
// terminal-type method (the user runs those, never the sidecar), or the
// agent's refusal.
func (w *Worker) hostAuthenticate(ctx context.Context, conn *acpclient.Conn, id string, offered []acpclient.AuthInfo) *protocol.Error {
	found := false
	for _, a := range offered {
		if a.ID == id {
			if a.Type == "terminal" {
				return protocol.Domain(protocol.ErrAuthFailed, "auth method "+protocol.QuoteShort(id)+" is terminal-type: the user runs it, the sidecar never does", false)
			}
			found = true
		}
	}
	if !found {
		return protocol.Domain(protocol.ErrAuthFailed, "the agent offers no auth method "+w.Clean(protocol.QuoteShort(id)), false)
	}
	if err := conn.Call(ctx, acp.AgentMethodAuthenticate, acp.AuthenticateRequest{MethodId: id}, nil); err != nil {
		e := ACPError(w.Clean, "authenticate", err)
		e.Data.Code = protocol.ErrAuthFailed
		return e
	}
	return nil
}

// sessionError is the open's error for a failed session/new|load|resume:
// AUTH_REQUIRED (data.authMethods) when the agent requires authentication
// the open did not give, AUTH_FAILED when it still does after the open's
// authMethod, else ACPError.
func (w *Worker) sessionError(step string, err error, p protocol.OpenParams, authMethods []json.RawMessage) *protocol.Error {
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || je.Code != acpclient.CodeAuthRequired {
		return ACPError(w.Clean, step, err)
	}
	e := ACPError(w.Clean, step, err)
	if p.AuthMethod != nil {
		e.Data.Code = protocol.ErrAuthFailed
		e.Message += " (after authenticate " + w.Clean(protocol.QuoteShort(*p.AuthMethod)) + ")"
		return e
	}
	e.Data.Code = protocol.ErrAuthRequired
	e.Message += " (the agent requires authentication: open with authMethod, one of data.authMethods)"
	e.Data.AuthMethods = authMethods
	if e.Data.AuthMethods == nil {
		e.Data.AuthMethods = []json.RawMessage{}
	}
	return e
}
