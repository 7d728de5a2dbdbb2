package client

import "github.com/acpx-sidecar/acpx-sidecar/protocol"

// Egress by name (docs/protocol.md §19.1): a sandbox whose network is an
// allow list, the session/network audit and the network totals.

// NetworkNotice is the session/network notification: one connection of
// the tree (Decision "allowed", sent when it ends, with BytesOut, BytesIn
// and Ms) or one refused attempt ("denied", at least once per destination
// per turn). Options.OnNetwork receives it.
type NetworkNotice = protocol.NetworkNotice

// NetworkTotals are StatusResult.Network (one session; nil without an
// allow list) and StatsResult.Network (every session since the sidecar
// started): connections allowed, attempts denied, bytes each way.
type NetworkTotals = protocol.NetworkTotals

// AllowNetwork is a Sandbox.Network in which exactly entries are
// reachable: "api.openai.com:443", "*.anthropic.com:443" (any name one or
// more labels below the domain), "127.0.0.1:8787", "[::1]:8787". A bad
// entry is refused -32602 with data.field "sandbox.network.allow.N".
func AllowNetwork(entries ...string) *protocol.SandboxNetwork {
	if entries == nil {
		entries = []string{}
	}
	return &protocol.SandboxNetwork{Mode: protocol.NetworkAllow, Allow: entries}
}
