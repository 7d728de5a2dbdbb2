// Package allow parses and matches the entries of a session's egress
// allow list, `sandbox.network.allow` (docs/protocol.md §19.1, "Egress by
// name"). It has no dependency beyond the standard library: the host
// protocol's validation (package protocol) and the forwarders
// (internal/egress) share it.
//
// An entry is one of
//
//	name:port        a DNS name, exactly (api.openai.com:443)
//	*.domain:port    any name one or more labels below domain
//	                 (*.test:8080 admits a.test and a.b.test, not test)
//	IPv4:port        an IPv4 address (127.0.0.1:8787)
//	[IPv6]:port      an IPv6 address in brackets ([::1]:8787)
//
// Names are case-insensitive and kept lower-case, with one trailing dot
// dropped; each label is 1-63 bytes of letters, digits, '-' and '_', the
// whole name at most 253 bytes; a name whose last label is all digits is
// refused (it reads as a mistyped address). Ports are 1-65535; there are
// no ranges and no wildcard ports. Addresses must be unicast (no
// unspecified, multicast or broadcast address, no IPv6 zone).
package allow

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// MaxEntries bounds the entries of one allow list.
const MaxEntries = 256

// Kind says what an Entry names.
type Kind int

const (
	// Name is one DNS name (Entry.Name).
	Name Kind = iota + 1
	// Wildcard is every name strictly below Entry.Name ("*.domain").
	Wildcard
	// Addr is one IP address (Entry.Addr).
	Addr
)

// Entry is one parsed allow entry.
type Entry struct {
	// Kind is Name, Wildcard or Addr: which of Name and Addr is set.
	Kind Kind
	// Name is the lower-case name (Kind Name) or the domain below which
	// names match (Kind Wildcard), without a trailing dot.
	Name string
	// Addr is the address of Kind Addr (an IPv4 address is never
	// IPv4-mapped IPv6).
	Addr netip.Addr
	// Port is the TCP port, 1-65535.
	Port uint16
}

// String is the entry's canonical form: "name:port", "*.domain:port",
// "1.2.3.4:port" or "[v6]:port".
func (e Entry) String() string {
	switch e.Kind {
	case Wildcard:
		return "*." + e.Name + ":" + strconv.Itoa(int(e.Port))
	case Addr:
		return netip.AddrPortFrom(e.Addr, e.Port).String()
	}
	return e.Name + ":" + strconv.Itoa(int(e.Port))
}

// Not shared: alike only in form to other packages' sentinel blocks (statestore's); each its own errors.

// Parse errors, wrapped by Parse's error.
var (
	ErrNoPort   = errors.New("an entry needs a port: name:port, *.domain:port, IPv4:port or [IPv6]:port")
	ErrBadPort  = errors.New("the port must be 1-65535")
	ErrBadName  = errors.New("not a DNS name (labels of 1-63 letters, digits, '-' or '_', at most 253 bytes, not all digits at the end)")
	ErrBadAddr  = errors.New("not a unicast IP address (IPv6 goes in brackets, without a zone)")
	ErrWildcard = errors.New("a wildcard is '*.' followed by a domain, as in *.example.com:443")
	// ErrLocalhost: inside the tree localhost is read from /etc/hosts,
	// never asked of the sidecar's resolver, so a name entry for it could
	// never be used.
	ErrLocalhost = errors.New("localhost is the tree's own loopback: list 127.0.0.1:port or [::1]:port")
	// ErrURL: an entry written as a URL (the model's base URL pasted).
	ErrURL = errors.New("an entry is host:port, not a URL: write api.example.com:443 for https://api.example.com")
)

// Parse reads one entry. Errors wrap one of the Err values above.
func Parse(s string) (Entry, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strings.HasPrefix(port, "+") || strings.HasPrefix(port, "0") {
		return Entry{}, ErrBadPort
	}
	e.Port = uint16(n)
	switch {
	case strings.HasPrefix(host, "["):
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		if err != nil || !a.Is6() || a.Is4In6() || !unicast(a) || a.Zone() != "" || !strings.HasSuffix(host, "]") {
			return Entry{}, ErrBadAddr
		}
		e.Kind, e.Addr = Addr, a
	case looksLikeIPv4(host):
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() || !unicast(a) {
			return Entry{}, ErrBadAddr
		}
		e.Kind, e.Addr = Addr, a
	case strings.HasPrefix(host, "*."):
		name, ok := CanonicalName(host[2:])
		if !ok {
			return Entry{}, ErrWildcard
		}
		e.Kind, e.Name = Wildcard, name
	case strings.Contains(host, "*"):
		return Entry{}, ErrWildcard
	default:
		name, ok := CanonicalName(host)
		if !ok {
			return Entry{}, ErrBadName
		}
		if name == "localhost" || strings.HasSuffix(name, ".localhost") {
			return Entry{}, ErrLocalhost
		}
		e.Kind, e.Name = Name, name
	}
	return e, nil
}

// splitHostPort splits "host:port" and "[v6]:port" at the last colon; a
// bare IPv6 address (several colons, no brackets) is ErrBadAddr.
func splitHostPort(s string) (host, port string, err error) {
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return "", "", ErrURL
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", ErrNoPort
	}
	host, port = s[:i], s[i+1:]
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		return "", "", ErrBadAddr
	}
	if host == "" {
		return "", "", ErrBadName
	}
	if port == "" {
		return "", "", ErrNoPort
	}
	return host, port, nil
}

// looksLikeIPv4 reports whether s is made of digits and dots only.
func looksLikeIPv4(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}

// unicast reports whether a may be a destination: not unspecified,
// multicast or the IPv4 broadcast address.
func unicast(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// CanonicalName returns s lower-cased without one trailing dot, and
// whether it is a DNS name as this package accepts one (see the package
// doc).
func CanonicalName(s string) (string, bool) {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	s = strings.ToLower(s)
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	if looksLikeIPv4(labels[len(labels)-1]) {
		return "", false
	}
	return s, true
}

// List is a parsed allow list.
type List []Entry

// ListError is ParseList's refusal: entry Index (0-based) is bad.
type ListError struct {
	// Index is the bad entry's 0-based position (MaxEntries for a list
	// that is too long).
	Index int
	// Err is Parse's error for the entry, or ErrTooMany.
	Err error
}

// Error names the entry's index and Err.
func (e *ListError) Error() string {
	return "entry " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap returns Err, so errors.Is sees the Err* sentinels.
func (e *ListError) Unwrap() error { return e.Err }

// ErrTooMany is ParseList's error (in a *ListError at index MaxEntries)
// for a list longer than MaxEntries.
var ErrTooMany = errors.New("an allow list holds at most " + strconv.Itoa(MaxEntries) + " entries")

// ParseList parses entries in order; the first bad one is a *ListError.
// Duplicates (by canonical form) are kept once.
func ParseList(entries []string) (List, error) {
	if len(entries) > MaxEntries {
		return nil, &ListError{Index: MaxEntries, Err: ErrTooMany}
	}
	out := make(List, 0, len(entries))
	seen := map[Entry]bool{}
	for i, s := range entries {
		e, err := Parse(s)
		if err != nil {
			return nil, &ListError{Index: i, Err: err}
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out, nil
}

// MatchName reports whether name (canonical: CanonicalName) is admitted
// by the name or wildcard entry e: equal to e.Name, or, for a wildcard,
// ending in "."+e.Name with at least one label before it.
func (e Entry) MatchName(name string) bool {
	switch e.Kind {
	case Name:
		return name == e.Name
	case Wildcard:
		return len(name) > len(e.Name)+1 && strings.HasSuffix(name, e.Name) && name[len(name)-len(e.Name)-1] == '.'
	}
	return false
}

// NamePorts returns the ports l admits for name (canonical), ascending
// and without repeats; none when no name or wildcard entry matches.
func (l List) NamePorts(name string) []uint16 {
	var ports []uint16
	for _, e := range l {
		if e.MatchName(name) {
			ports = insertPort(ports, e.Port)
		}
	}
	return ports
}

// AllowsName reports whether l admits name (canonical) on some port.
func (l List) AllowsName(name string) bool {
	for _, e := range l {
		if e.MatchName(name) {
			return true
		}
	}
	return false
}

// AllowsNamePort reports whether l admits name (canonical) on port.
func (l List) AllowsNamePort(name string, port uint16) bool {
	for _, e := range l {
		if e.Port == port && e.MatchName(name) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether l has the address entry a:port (a unmapped).
func (l List) AllowsAddr(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	for _, e := range l {
		if e.Kind == Addr && e.Port == port && e.Addr == a {
			return true
		}
	}
	return false
}

// Ports returns every port of l, ascending and without repeats.
func (l List) Ports() []uint16 {
	var ports []uint16
	for _, e := range l {
		ports = insertPort(ports, e.Port)
	}
	return ports
}

// Addrs returns the distinct addresses of l's address entries, in order.
func (l List) Addrs() []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, e := range l {
		if e.Kind == Addr && !seen[e.Addr] {
			seen[e.Addr] = true
			out = append(out, e.Addr)
		}
	}
	return out
}

// HasNames reports whether l has a name or wildcard entry.
func (l List) HasNames() bool {
	for _, e := range l {
		if e.Kind != Addr {
			return true
		}
	}
	return false
}

// Strings returns the canonical form of every entry, in order.
func (l List) Strings() []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.String()
	}
	return out
}

func insertPort(ports []uint16, p uint16) []uint16 {
	i := 0
	for i < len(ports) && ports[i] < p {
		i++
	}
	if i < len(ports) && ports[i] == p {
		return ports
	}
	ports = append(ports, 0)
	copy(ports[i+1:], ports[i:])
	ports[i] = p
	return ports
}
