package session

import (
	"context"
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Reply delivers the outcome of one host request: a result (marshalled as
// the JSON-RPC result; nil means {}), or an error (an *protocol.Error; any
// other error is answered as -32603). The host side (internal/rpc) passes
// one with every request that takes a Reply; the session calls it exactly
// once. It is an alias of the plain func type, as rpc.Reply is, so Manager
// implements rpc.Backend while this package does not import internal/rpc.
type Reply = func(result any, err error)

// Host is the host connection as the sessions see it (implemented by
// *rpc.Server).
type Host interface {
	// Notify sends a notification whose params are the JSON bytes given,
	// written verbatim into the frame (docs/architecture.md, "Update
	// path"); it blocks while the host is not reading.
	Notify(method string, params json.RawMessage) error
	// RequestPermission asks the host (docs/protocol.md §9); ctx is the turn's.
	RequestPermission(ctx context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error)
	// PermissionRequests: the host declared capabilities.permissionRequests.
	PermissionRequests() bool
}
