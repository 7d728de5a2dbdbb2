package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// batchRecHost is a BatchHost that logs every frame it gets, notes which
// came in batches, and checks at every batch that each of its updates is
// already in the session journal's file (docs/protocol.md §16).
type batchRecHost struct {
	fakeHost
	journalPath string

	mu       sync.Mutex
	log      []string // "update <seq>", "notice <method>", "reply"
	batches  int      // NotifyBatch calls
	maxBatch int      // frames of the largest
	problems []string
}

func (h *batchRecHost) NotifyBatch(ns []jsonl.Notification) error {
	onDisk, _ := os.ReadFile(h.journalPath)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches++
	h.maxBatch = max(h.maxBatch, len(ns))
	for _, n := range ns {
		if n.Method != protocol.NotifySessionUpdate {
			h.log = append(h.log, "notice "+n.Method)
			continue
		}
		var p protocol.SessionUpdateNotice
		if err := json.Unmarshal(n.Params, &p); err != nil {
			h.problems = append(h.problems, "undecodable update: "+err.Error())
			continue
		}
		h.log = append(h.log, "update")
		// The params (they start with '{', rare in the file: a fast
		// search), right after the entry's head.
		head := []byte(`"session":"` + p.Session + `","seq":` + jsonNumber(p.Seq) + `,"method":"session/update","params":`)
		if i := bytes.Index(onDisk, n.Params); i < 0 || !bytes.HasSuffix(onDisk[:i], head) {
			h.problems = append(h.problems, "update "+jsonNumber(p.Seq)+" reached the host before the journal file")
		}
	}
	return nil
}

func (h *batchRecHost) note(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// TestFlushOut_BatchHostGetsTurnInOrderBeforeReply: with a BatchHost, a
// flood turn's updates reach the host through NotifyBatch only, every one
// already in the journal file when its batch is written, all of them
// before the turn's reply.
func TestFlushOut_BatchHostGetsTurnInOrderBeforeReply(t *testing.T) {
	if err := reaper.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	sup, err := reaper.NewSupervisor(reaper.Options{Logger: zap.NewNop()})
	if err != nil {
		t.Skip("containment unavailable:", err)
	}
	defer func() { sup.Seal(); _ = sup.Close() }()
	cfg := config.DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Launcher = launch.ReaperLauncher(sup)
	cfg.Bounds.TermGrace, cfg.Bounds.KillGrace = 300*time.Millisecond, 300*time.Millisecond
	const key, flood = "batched", 3000
	host := &batchRecHost{journalPath: journal.SegmentPath(filepath.Join(cfg.StateDir, "sessions"), journal.Stem(key), 0)}
	m := NewManager(cfg, host)
	defer func() { m.Shutdown(); m.Wait() }()
	open := await(t, func(r func(any, error)) {
		m.Open(context.Background(), protocol.OpenParams{SessionKey: key, Agent: "generic",
			Command: &protocol.Command{Path: faultAgent, Args: []string{"--mode", "flood=3000"}}, Cwd: t.TempDir(),
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
	}).(protocol.OpenResult)
	res := await(t, func(r func(any, error)) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: open.Session, RequestID: "t1", Prompt: json.RawMessage(`"go"`)},
			func(v any, err error) { host.note("reply"); r(v, err) })
	}).(protocol.PromptResult)
	if res.Status != "completed" {
		t.Fatalf("turn: %+v", res)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	for _, p := range host.problems {
		t.Error(p)
	}
	updates, replyAt := 0, -1
	for i, e := range host.log {
		switch e {
		case "update":
			if replyAt >= 0 {
				t.Fatalf("an update after the turn's reply (frame %d)", i)
			}
			updates++
		case "reply":
			replyAt = i
		}
	}
	if updates < flood || replyAt < 0 {
		t.Fatalf("%d updates, reply at %d; want ≥ %d updates, then the reply", updates, replyAt, flood)
	}
	host.fakeHost.mu.Lock()
	defer host.fakeHost.mu.Unlock()
	for _, n := range host.fakeHost.notes {
		if len(n) > len("session/update") && n[:len("session/update")] == "session/update" {
			t.Fatalf("an update went through Notify, not NotifyBatch: %.80s", n)
		}
	}
	t.Logf("%d updates in %d batches (largest %d frames)", updates, host.batches, host.maxBatch)
}
