package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

// Pins are the sidecar's --resolve NAME=IP flags (docs/protocol.md §2):
// each pinned name resolves to exactly its addresses, in the order given,
// and is never asked of the host's resolver. Keys are canonical names
// (allow.CanonicalName).
type Pins map[string][]netip.Addr

// ParsePin reads one --resolve value, "NAME=IP" (IPv6 with or without
// brackets), and adds it to p. A name may be pinned to several
// addresses by repeating the flag.
func (p Pins) ParsePin(s string) error {
	name, ip, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("--resolve %q: want NAME=IP", s)
	}
	cn, ok := allow.CanonicalName(name)
	if !ok || strings.Contains(cn, "*") {
		return fmt.Errorf("--resolve %q: %q is not a DNS name", s, name)
	}
	if cn == "localhost" || strings.HasSuffix(cn, ".localhost") {
		return fmt.Errorf("--resolve %q: localhost is each tree's own loopback and can never be listed, so a pin of it would do nothing", s)
	}
	if ap, err := netip.ParseAddrPort(ip); err == nil {
		return fmt.Errorf("--resolve %q: give the address without a port (%s): the port is the allow entry's", s, ap.Addr())
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]"))
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return fmt.Errorf("--resolve %q: %q is not a unicast IP address", s, ip)
	}
	p[cn] = append(p[cn], a.Unmap())
	return nil
}

// ErrResolvedInternal is the dial error for a name that the host's
// resolver (not a pin) answered with only loopback, unspecified or
// link-local addresses: such an answer would hand the tree the host's
// own loopback or a cloud metadata service (a rebinding), so it is never
// dialled. Pin the name with --resolve to mean it.
var ErrResolvedInternal = errors.New("the name resolved to a loopback or link-local address (pin it with --resolve to allow that)")

// resolver resolves names on the host side, when a connection is made.
type resolver struct {
	pins   Pins
	lookup func(ctx context.Context, name string) ([]netip.Addr, error)
}

func newResolver(pins Pins) *resolver {
	return &resolver{pins: pins, lookup: func(ctx context.Context, name string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	}}
}

// resolve returns the addresses to dial for name: its pins, or the
// host resolver's answer without loopback, unspecified and link-local
// addresses (ErrResolvedInternal when nothing is left).
func (r *resolver) resolve(ctx context.Context, name string) ([]netip.Addr, error) {
	if as, ok := r.pins[name]; ok {
		return as, nil
	}
	as, err := r.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	out := as[:0:0]
	for _, a := range as {
		a = a.Unmap()
		if a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, ErrResolvedInternal
	}
	return out, nil
}
