package main

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/adapter"
	"github.com/acpx-sidecar/acpx-sidecar/internal/rpc"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
)

// The extension methods (docs/protocol.md §23) are served only when the
// Manager and the Server carry them: checked here, at compile time.
var (
	_ rpc.ExtBackend  = (*adapter.Manager)(nil)
	_ session.ExtHost = (*rpc.Server)(nil)
)
