package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// sessionRecord is what the session knows of the agent's side and keeps
// in its record (docs/protocol.md §6 identity, §15 records): the store the
// record lives in, the identity the host sees, what the agent said of
// itself in the handshake. Actor-owned; admission fills it from its result
// (admission.go).
type sessionRecord struct {
	st             *store.Store
	identity       protocol.Identity
	agentInfo      protocol.AgentInfo
	agentCaps      acpclient.AgentCaps
	closeSupported bool // the agent advertised sessionCapabilities.close (from the handshake)
	resumed        bool // the open resumed the key's earlier ACP session
	discarded      bool // the record was deleted at close
	// ps is the provider state in the state store (provstate.go); nil
	// without --state-store.
	ps *provstate.State
}
