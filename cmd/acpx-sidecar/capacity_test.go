package main

import (
	"io"
	"testing"
)

// TestMaxSessionsFor: the derived --max-sessions leaves fdReserve
// descriptors and counts fdsPerSession for each session, at least 1.
func TestMaxSessionsFor(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 1}, {40, 1}, {41, 1}, {128, 12}, {1024, 124}, {1 << 40, maxDerivedSessions}} {
		if got := maxSessionsFor(c.nofile); got != c.want {
			t.Errorf("maxSessionsFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// TestMaxSessionsFlag: --max-sessions takes 0 (derived) and positive
// values and refuses negative ones.
func TestMaxSessionsFlag(t *testing.T) {
	if o, err := parseFlags([]string{"--max-sessions", "3"}, io.Discard); err != nil || o.caps.maxSessions != 3 {
		t.Fatalf("--max-sessions 3: %v %+v", err, o)
	}
	if o, err := parseFlags(nil, io.Discard); err != nil || o.caps.maxSessions != 0 {
		t.Fatalf("default: %v", err)
	}
	if _, err := parseFlags([]string{"--max-sessions", "-1"}, io.Discard); err == nil {
		t.Fatalf("--max-sessions -1 accepted")
	}
}

// TestRaiseNofile: after raiseNofile the soft limit is the hard one.
func TestRaiseNofile(t *testing.T) {
	n, err := raiseNofile()
	if err != nil || n == 0 {
		t.Fatalf("raiseNofile = %d, %v", n, err)
	}
}

// TestMaxConnectionsFor: a quarter of the descriptors after the reserve,
// six per connection, at least 16.
func TestMaxConnectionsFor(t *testing.T) {
	for nofile, want := range map[uint64]int{0: 16, 100: 16, 1024: 41, 20000: 832, 1 << 20: 43689} {
		if got := maxConnectionsFor(nofile); got != want {
			t.Errorf("maxConnectionsFor(%d) = %d, want %d", nofile, got, want)
		}
	}
}
