package protocol

import (
	"errors"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

// Egress by name (docs/protocol.md §19.1; PROTOCOL §10.4): session/open
// `sandbox.network: {"allow": [...]}`, `limits.connections`, the
// `session/network` audit and the `network` totals of session/status and
// sidecar/stats.

// NetworkAllow is SandboxNetwork.Mode for {"allow": [entries]}: the tree
// gets a network namespace of its own in which exactly the listed
// destinations are reachable.
const NetworkAllow = "allow"

// MaxAllowEntries bounds `sandbox.network.allow` (entries).
const MaxAllowEntries = allow.MaxEntries

// Bounds of `limits.connections`: the connections a session's tree may
// have open at once through its allow list (docs/protocol.md §18.2).
const (
	DefaultConnections = 256
	MinConnections     = 1
	MaxConnections     = 65536
)

// NotifySessionNetwork is the `session/network` audit notification
// (NetworkNotice), journaled like every session notification.
const NotifySessionNetwork = "session/network"

// NetworkDecision is `session/network` `decision`.
type NetworkDecision string

const (
	// NetworkAllowed: a listed destination; the connection was forwarded
	// (or its connect failed: Reason says so). One entry per connection,
	// sent when it ends, with its byte counts.
	NetworkAllowed NetworkDecision = "allowed"
	// NetworkDenied: refused; at least once per destination per turn.
	NetworkDenied NetworkDecision = "denied"
)

// NetworkNotice is `session/network` (docs/protocol.md §19.1): one
// connection, or one refused attempt, of the tree. Destination is what
// the tree asked for ("api.openai.com:443", "127.0.0.1:8787",
// "[2001:db8::1]:443", a DNS name alone for a refused lookup, "udp
// 8.8.8.8:53" for a datagram); BytesOut counts what the tree sent, BytesIn
// what it received (TCP payload); Ms the connection's life in
// milliseconds; RequestID the turn running when the connection was made
// (absent outside a turn); Reason why it was denied or why an allowed one
// carried nothing.
type NetworkNotice struct {
	// Session is the id of the session whose tree made the connection.
	Session string `json:"session"`
	// SessionKey is that session's key.
	SessionKey string `json:"sessionKey"`
	// RequestID is the requestId of the turn running when the connection
	// was accepted (for a denied one, when it was refused); absent
	// outside a turn.
	RequestID *string `json:"requestId,omitempty"`
	// Destination is what the tree asked for: "name:port", "1.2.3.4:443",
	// "[2001:db8::1]:443", a name alone for a DNS query, "udp …" or
	// "icmp …" for a datagram; secret values are redacted from it.
	Destination string `json:"destination"`
	// Decision is NetworkAllowed or NetworkDenied.
	Decision NetworkDecision `json:"decision"`
	// Reason says why a denied one was refused ("not listed", "name not
	// listed", "connection limit", "sidecar connection limit", "too many
	// names", "not tcp"), or "connect: …" for an allowed one whose
	// connect failed; omitted for an allowed connection that worked.
	Reason string `json:"reason,omitempty"`
	// BytesOut is the bytes the tree sent to the destination (TCP
	// payload, no headers); 0 when denied.
	BytesOut int64 `json:"bytesOut"`
	// BytesIn is the bytes the tree received from the destination (TCP
	// payload, no headers); 0 when denied.
	BytesIn int64 `json:"bytesIn"`
	// Ms is the connection's life in milliseconds, from the sidecar's
	// accept to its end; 0 when denied.
	Ms int64 `json:"ms"`
}

// NetworkTotals is the `network` member of session/status (one session,
// absent without an allow list) and of sidecar/stats (every session since
// the sidecar started): connections allowed, attempts denied (every one,
// including those whose notifications were rate-limited), and the bytes
// of ended connections each way.
type NetworkTotals struct {
	// Allowed counts the allowed connections that have ended (those whose
	// connect failed included).
	Allowed uint64 `json:"allowed"`
	// Denied counts every refused attempt, also those a rate-limited
	// session/network never reported.
	Denied uint64 `json:"denied"`
	// BytesOut is the bytes the tree sent over its ended connections
	// (TCP payload).
	BytesOut uint64 `json:"bytesOut"`
	// BytesIn is the bytes the tree received over its ended connections
	// (TCP payload).
	BytesIn uint64 `json:"bytesIn"`
}

// validateAllow checks every entry of `sandbox.network.allow`: -32602
// with field "sandbox.network.allow.N" and the reason for the first bad
// one.
func validateAllow(entries []string) *Error {
	_, err := allow.ParseList(entries)
	var le *allow.ListError
	if errors.As(err, &le) {
		field := "sandbox.network.allow." + strconv.Itoa(le.Index)
		if errors.Is(err, allow.ErrTooMany) {
			field = "sandbox.network.allow"
		}
		return InvalidParams(field, field+": "+le.Err.Error())
	}
	return nil
}
