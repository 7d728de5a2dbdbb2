package egress

import (
	"errors"
	"net/netip"
	"sync"
)

// SyntheticPrefix is the range names get their addresses from inside the
// tree's namespace (RFC 2544's benchmarking range, never routed on the
// internet): the namespace routes it to its own loopback ("local"), so
// a connect to any of its addresses reaches the sidecar's listeners, and
// getsockname says which address, hence which name, was meant.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/16")

// MaxNames bounds the distinct names one session's DNS hands addresses
// to (a wildcard admits any number): past it, a new name is answered
// SERVFAIL and audited denied (ReasonNames).
const MaxNames = 4096

// errNamesFull is names.assign's error past MaxNames.
var errNamesFull = errors.New("egress: too many names")

// names maps listed names to synthetic addresses and back, one address
// per name for the session's life. Safe for concurrent use.
type names struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr
	max    int
}

func newNames(max int) *names {
	// .0 is the network's own address; start at .1.
	return &names{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: SyntheticPrefix.Addr().Next(), max: max}
}

// assign returns name's address, giving it the next free one on first
// use; errNamesFull past max names or when the range is used up.
func (n *names) assign(name string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a, nil
	}
	if len(n.byName) >= n.max || !SyntheticPrefix.Contains(n.next) {
		return netip.Addr{}, errNamesFull
	}
	a := n.next
	n.next = a.Next()
	n.byName[name], n.byAddr[a] = a, name
	return a, nil
}

// lookup returns the name an address was given to.
func (n *names) lookup(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a]
	return name, ok
}
