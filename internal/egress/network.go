// Package egress gives a session's provider tree a network of its own in
// which exactly the destinations of `sandbox.network.allow` are
// reachable, by the names and ports listed, and audits every connection
// (docs/protocol.md §19.1, "Egress by name"; docs/architecture.md,
// "Egress by name").
//
// New makes the tree's network namespace and serves it until Close:
//
//   - every listed port is a listening socket the sidecar created inside
//     the namespace (a dual-stack wildcard bind); an accepted connection's
//     local address (getsockname) says what was dialled: a listed address
//     (an `IP:port` entry; a non-loopback one is added to the namespace's
//     lo) or a name's synthetic address (SyntheticPrefix), and the
//     sidecar dials that destination from its own namespace, resolving a
//     name then (Pins first), and splices the two connections;
//   - a DNS server on the addresses /etc/resolv.conf names answers listed
//     names with their synthetic addresses and everything else NXDOMAIN;
//   - the namespace's default route is a TUN device the sidecar reads:
//     a TCP SYN to any other destination is answered RST, a datagram
//     ICMP-prohibited, and each is audited denied.
//
// The launcher joins the namespace (NetNSFD) instead of making one. The
// package's own parsing and matching of entries is internal/egress/allow.
package egress

import (
	"errors"
	"os"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

// Config is one session's egress.
type Config struct {
	// Allow is the parsed allow list (docs/protocol.md §19.1).
	Allow allow.List
	// Pins are the sidecar's --resolve names; nil = none.
	Pins Pins
	// MaxConns is limits.connections: connections open at once; 0 =
	// DefaultMaxConns. One more is accepted and reset at once, audited
	// denied (ReasonLimit).
	MaxConns int
	// Wake is called, never under a lock of this package and never
	// blocking it for long, when an audit entry is queued after the queue
	// was empty: the session then takes them (Network.TakeEvents). nil =
	// none (the caller polls).
	Wake func()
	// ResolvConf is the resolver configuration whose nameservers the
	// tree's DNS listens on; "" = /etc/resolv.conf.
	ResolvConf string
	// Shared are counters every session's counts are added to as well
	// (the sidecar's); nil = none.
	Shared *Counters
	// Budget is the sidecar's bound on connections across its sessions;
	// nil = none. One over it is reset at once, audited denied
	// (ReasonSidecarLimit).
	Budget *Budget
}

// ErrUnsupported is New's error where the sidecar cannot make a network
// namespace of its own (not Linux, no CAP_SYS_ADMIN or CAP_NET_ADMIN, no
// /dev/net/tun): the open is PLATFORM_UNSUPPORTED.
var ErrUnsupported = errors.New("egress: this machine cannot make a network namespace with a TUN device for the tree")

// nameservers reads the nameserver lines of a resolv.conf; none (or no
// file) means the resolver default, 127.0.0.1 and ::1.
func nameservers(path string) []string {
	if path == "" {
		path = "/etc/resolv.conf"
	}
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	if len(out) == 0 {
		out = []string{"127.0.0.1", "::1"}
	}
	return out
}

// Network is one session's egress: its namespace, listeners, DNS server,
// TUN reader and audit. A nil *Network is a session without one: its
// methods do nothing and report zero.
type Network struct {
	list  allow.List
	ns    int // the namespace's descriptor; -1 once closed
	aud   *auditor
	names *names
	fwd   *forwarder
	dns   *dnsServer
	tun   *os.File
	done  chan struct{} // closed when the TUN reader returned

	closeOnce sync.Once
}

// NetNSFD is the descriptor of the tree's network namespace, for the
// launcher to join (setns) instead of making a namespace; valid until
// Close.
func (n *Network) NetNSFD() int {
	if n == nil {
		return -1
	}
	return n.ns
}

// SetTurn tells the audit which turn runs (requestID; "" between turns):
// connections accepted from now on carry it, and a denied destination is
// reported again once in it.
func (n *Network) SetTurn(requestID string) {
	if n != nil {
		n.aud.setTurn(requestID)
	}
}

// TakeEvents returns the audit entries queued since the last call, in
// the order they were made.
func (n *Network) TakeEvents() []Event {
	if n == nil {
		return nil
	}
	return n.aud.take()
}

// Totals are the session's counters so far.
func (n *Network) Totals() Totals {
	if n == nil {
		return Totals{}
	}
	return n.aud.totals()
}

// Dropped counts audit entries dropped because MaxPendingEvents were
// already queued (the session did not take them).
func (n *Network) Dropped() uint64 {
	if n == nil {
		return 0
	}
	return n.aud.dropped.Load()
}

// Allow is the allow list n enforces.
func (n *Network) Allow() allow.List {
	if n == nil {
		return nil
	}
	return n.list
}

// Close ends every listener and forwarded connection (their audit
// entries are queued before it returns), the DNS server and the TUN
// reader, and closes the namespace's descriptor: once the tree is gone
// too, nothing holds the namespace and the kernel frees it. Idempotent.
func (n *Network) Close() {
	if n == nil {
		return
	}
	n.closeOnce.Do(func() {
		n.fwd.close()
		n.dns.close()
		if n.tun != nil {
			_ = n.tun.Close()
			<-n.done
		}
		closeFD(n.ns)
	})
}
