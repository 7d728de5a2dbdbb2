package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/stats"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// forwardSession is a session actor's forwarding state without a
// provider: forward + Publisher.Flush as onUpdate runs them, to a host that
// drops frames.
func forwardSession(b *testing.B, journaled bool) *Actor {
	b.Helper()
	dir := b.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.DefaultConfig()
	cfg.StateDir = dir
	cfg.Logger = zap.NewNop()
	m := &Shared{Config: cfg, Host: benchHost{jsonl.NewWriter(io.Discard, jsonl.NDJSON)}, Log: cfg.Logger, Stats: &stats.Counters{},
		Journals: registry.NewJournals(cfg.Caps.JournalMaxBytes, cfg.Logger), Router: nil}
	s := New(m, "s-0123456789abcdef", admission.Plan{Params: protocol.OpenParams{SessionKey: "bench", StateDir: dir}})
	s.rec.st = st
	if !journaled {
		s.pub.ForgoJournal()
	}
	s.turns.turn = &turn{requestID: "t1", ridJSON: jsonString("t1")}
	b.Cleanup(s.pub.CloseJournal)
	return s
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForwardUpdate measures the sidecar side of one forwarded
// update from the actor to the host frame (the host discards it), with
// and without the session journal, flushing every 64 updates as the
// actor does when its inbox holds a burst. The difference between the
// two is the journal's cost per update (the bound: 1 µs of CPU,
// reported as cpu-ns/update: user + system time of the process, which
// excludes time blocked in writeback);
// BenchmarkTurnUpdates measures the whole path with a real agent.
func BenchmarkForwardUpdate(b *testing.B) {
	update := json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"flood 1234;"}}`)
	for _, c := range []struct {
		name      string
		journaled bool
	}{{"journal", true}, {"nojournal", false}} {
		b.Run(c.name, func(b *testing.B) {
			s := forwardSession(b, c.journaled)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.forward(update, nil)
				if s.pub.Queued() >= 64 {
					s.pub.Flush()
				}
			}
			s.pub.Flush()
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/update")
		})
	}
}

// benchHost frames every notification as the host connection does
// (jsonl.Writer, NDJSON) into io.Discard.
type benchHost struct{ w *jsonl.Writer }

func (h benchHost) Notify(method string, params json.RawMessage) error {
	return h.w.WriteNotification(method, params)
}

func (benchHost) RequestPermission(context.Context, protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	return protocol.PermissionRequestResult{}, errors.New("no host")
}

func (benchHost) PermissionRequests() bool { return false }

// NotifyBatch frames ns in one write (BatchHost), as rpc.Server does.
func (h benchHost) NotifyBatch(ns []jsonl.Notification) error { return h.w.WriteNotifications(ns) }
