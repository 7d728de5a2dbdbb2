package main

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/adapter"
	"github.com/acpx-sidecar/acpx-sidecar/internal/outbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/rpc"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
)

// The extension methods (docs/protocol.md §23), elicitation (§22) and
// batched frames (§16) are served only when the Manager and the Server
// carry them — a signature that drifts would silently turn one off —:
// checked here, at compile time.
var (
	_ rpc.ExtBackend          = (*adapter.Manager)(nil)
	_ session.ExtHost         = (*rpc.Server)(nil)
	_ session.ElicitationHost = (*rpc.Server)(nil)
	_ outbox.BatchHost        = (*rpc.Server)(nil)
)
