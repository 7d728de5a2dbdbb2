package main

import (
	"fmt"
	"testing"
)

// TestStream_PacedChunksThenUsageGrowth: stream=5:10 sends "stream 0;" …
// "stream 4;" after the hello chunk; usage-grow=100 makes the turn's
// usage_update say used 100 × the session's turns.
func TestStream_PacedChunksThenUsageGrowth(t *testing.T) {
	p := start(t, "--mode", "stream=5:10,usage-grow=100")
	sid := handshake(t, p)
	for turn := 1; turn <= 2; turn++ {
		from := len(p.updates(0))
		if pr := decode[promptResult](t, p.call("session/prompt", promptText(sid, "go"), nil)); pr.StopReason != "end_turn" {
			t.Fatalf("stop %q", pr.StopReason)
		}
		ups := p.updates(from)
		if len(ups) != 7 {
			t.Fatalf("turn %d: %d updates, want hello + 5 + usage", turn, len(ups))
		}
		for i := 0; i < 5; i++ {
			if got := ups[i+1].Update.Content.Text; got != fmt.Sprintf("stream %d;", i) {
				t.Fatalf("turn %d update %d = %q", turn, i+1, got)
			}
		}
		if u := ups[6].Update; u.SessionUpdate != "usage_update" || u.Used != 100*turn {
			t.Fatalf("turn %d last update %+v, want usage_update used %d", turn, u, 100*turn)
		}
	}
}
