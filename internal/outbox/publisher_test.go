package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/redact"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// recHost is a Host (not a BatchHost) that keeps every frame it gets.
type recHost struct{ frames []jsonl.Notification }

func (h *recHost) Notify(method string, params json.RawMessage) error {
	h.frames = append(h.frames, jsonl.Notification{Method: method, Params: append([]byte(nil), params...)})
	return nil
}

// take returns the frames so far as "method params" lines and forgets them.
func (h *recHost) take() []string {
	var out []string
	for _, f := range h.frames {
		out = append(out, f.Method+" "+string(f.Params))
	}
	h.frames = nil
	return out
}

// batchHost is a BatchHost that reads the journal file at every batch.
type batchHost struct {
	recHost
	journalPath string
	batches     int
	onDisk      []string // the journal file as it was at each batch
}

func (h *batchHost) NotifyBatch(ns []jsonl.Notification) error {
	b, _ := os.ReadFile(h.journalPath)
	h.batches++
	h.onDisk = append(h.onDisk, string(b))
	for _, n := range ns {
		_ = h.recHost.Notify(n.Method, n.Params)
	}
	return nil
}

// TestFlushDue: the actor flushes once its inbox is drained or a batch is
// full, and never with nothing queued.
func TestFlushDue(t *testing.T) {
	for _, c := range []struct {
		queued     int
		inboxEmpty bool
		want       bool
	}{
		{0, true, false},
		{0, false, false},
		{1, true, true},
		{1, false, false},
		{MaxBatch - 1, false, false},
		{MaxBatch, false, true},
		{MaxBatch + 1, false, true},
		{MaxBatch, true, true},
	} {
		p := New(Config{Session: "s-1"})
		for i := 0; i < c.queued; i++ {
			p.Emit("x/n", []byte(`{}`))
		}
		if got := p.FlushDue(c.inboxEmpty); got != c.want {
			t.Errorf("queued %d, inbox empty %v: FlushDue %v, want %v", c.queued, c.inboxEmpty, got, c.want)
		}
	}
}

// TestPersistence_Status: session/status persistence reports each file's
// health as last told.
func TestPersistence_Status(t *testing.T) {
	const ok, deg = protocol.PersistenceOK, protocol.PersistenceDegraded
	for _, c := range []struct {
		h            persistHealth
		journal, rec protocol.PersistenceState
	}{
		{persistHealth{}, ok, ok},
		{persistHealth{journalDegraded: true}, deg, ok},
		{persistHealth{recordDegraded: true}, ok, deg},
		{persistHealth{journalDegraded: true, recordDegraded: true}, deg, deg},
		{persistHealth{ledgerErr: errors.New("x"), ledgerDegraded: true}, ok, ok}, // the ledger is not in status
	} {
		p := New(Config{Session: "s-1"})
		p.health = c.h
		if got := p.Persistence(); got.Journal != c.journal || got.Record != c.rec {
			t.Errorf("%+v: %+v, want journal %s record %s", c.h, *got, c.journal, c.rec)
		}
	}
}

// TestHealthNotices: the record's and the ledger's session/journal
// notices: degraded once at the first failure, ok once at the first
// success after it, nothing otherwise; a ledger entry is rewritten only
// while degraded and live.
func TestHealthNotices(t *testing.T) {
	fail := fmt.Errorf("write: %w", syscall.ENOSPC)
	const ok = `"state":"ok"`
	type step struct {
		name  string
		do    func(p *Publisher, writes *int)
		want  string // a substring of the one notice expected; "" none
		wrote int    // ledger writes attempted so far
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"record", []step{
			{"ok while healthy", func(p *Publisher, _ *int) { p.NoteRecordWrite(nil) }, "", 0},
			{"first failure", func(p *Publisher, _ *int) { p.NoteRecordWrite(fail) }, `"state":"degraded","file":"record","error":"ENOSPC: no space left on device","sinceSeq":0}`, 0},
			{"second failure", func(p *Publisher, _ *int) { p.NoteRecordWrite(fail) }, "", 0},
			{"works again", func(p *Publisher, _ *int) { p.NoteRecordWrite(nil) }, `"state":"ok","file":"record","sinceSeq":0}`, 0},
			{"ok again", func(p *Publisher, _ *int) { p.NoteRecordWrite(nil) }, "", 0},
		}},
		{"ledger", []step{
			{"report with nothing failed", func(p *Publisher, _ *int) { p.ReportLedger() }, "", 0},
			{"retry while healthy", func(p *Publisher, w *int) { p.RetryLedger(true, func() error { *w++; return nil }) }, "", 0},
			{"failure noted", func(p *Publisher, _ *int) { p.NoteLedgerFailure(fail) }, "", 0},
			{"report", func(p *Publisher, _ *int) { p.ReportLedger() }, `"state":"degraded","file":"ledger","error":"ENOSPC: no space left on device","sinceSeq":0}`, 0},
			{"report again", func(p *Publisher, _ *int) { p.ReportLedger() }, "", 0},
			{"retry not live", func(p *Publisher, w *int) { p.RetryLedger(false, func() error { *w++; return nil }) }, "", 0},
			{"retry fails", func(p *Publisher, w *int) { p.RetryLedger(true, func() error { *w++; return fail }) }, "", 1},
			{"retry works", func(p *Publisher, w *int) { p.RetryLedger(true, func() error { *w++; return nil }) }, `"state":"ok","file":"ledger","sinceSeq":0}`, 2},
			{"retry after ok", func(p *Publisher, w *int) { p.RetryLedger(true, func() error { *w++; return nil }) }, "", 2},
			{"report after ok", func(p *Publisher, _ *int) { p.ReportLedger() }, "", 2},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &recHost{}
			p := New(Config{Session: "s-1", Host: h})
			writes := 0
			for _, s := range c.steps {
				s.do(p, &writes)
				got := h.take()
				switch {
				case s.want == "" && len(got) != 0:
					t.Fatalf("%s: told %q, want nothing", s.name, got)
				case s.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], protocol.NotifySessionJournal+" ") || !strings.Contains(got[0], s.want)):
					t.Fatalf("%s: told %q, want one session/journal with %s", s.name, got, s.want)
				case strings.Contains(s.want, ok) && strings.Contains(got[0], `"error"`):
					t.Fatalf("%s: an ok notice with an error: %s", s.name, got[0])
				}
				if writes != s.wrote {
					t.Fatalf("%s: %d ledger writes, want %d", s.name, writes, s.wrote)
				}
			}
		})
	}
}

// TestFlush_JournalFirstRedactedInOrder: a BatchHost gets the queued
// frames in one batch, in order, each already in the journal file; a
// secret is in neither; the updates are counted.
func TestFlush_JournalFirstRedactedInOrder(t *testing.T) {
	const secret = "sk-test-0123456789"
	dir := t.TempDir()
	jr := registry.NewJournals(0, nil)
	h := &batchHost{journalPath: journal.SegmentPath(dir, journal.Stem("k"), 0)}
	var forwarded atomic.Uint64
	p := New(Config{Session: "s-1", Key: "k", Journals: jr, SessionsDir: func() string { return dir },
		Host: h, Redactor: redact.New(map[string]string{"TOKEN": secret}), Forwarded: &forwarded})
	defer p.CloseJournal()
	p.EmitUpdate([]byte(`"t1"`), p.NextSeq(), json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"text":"`+secret+`"}}`))
	p.Emit(protocol.NotifySessionPermission, []byte(`{"session":"s-1","why":"`+secret+`"}`))
	p.EmitUpdate([]byte(`null`), p.NextSeq(), json.RawMessage(`{"sessionUpdate":"plan"}`))
	if p.Queued() != 3 {
		t.Fatalf("queued %d", p.Queued())
	}
	p.Flush()
	if h.batches != 1 || len(h.frames) != 3 || p.Queued() != 0 {
		t.Fatalf("%d batches, %d frames, %d still queued", h.batches, len(h.frames), p.Queued())
	}
	for i, want := range []string{protocol.NotifySessionUpdate, protocol.NotifySessionPermission, protocol.NotifySessionUpdate} {
		f := h.frames[i]
		if f.Method != want {
			t.Fatalf("frame %d is %s, want %s", i, f.Method, want)
		}
		if strings.Contains(string(f.Params), secret) {
			t.Fatalf("frame %d carries the secret: %s", i, f.Params)
		}
		if !strings.Contains(h.onDisk[0], `"params":`+string(f.Params)) {
			t.Fatalf("frame %d reached the host before the journal: %s", i, f.Params)
		}
	}
	if strings.Contains(h.onDisk[0], secret) {
		t.Fatalf("the journal carries the secret")
	}
	if forwarded.Load() != 2 || p.Seq() != 2 {
		t.Fatalf("forwarded %d, seq %d; want 2, 2", forwarded.Load(), p.Seq())
	}
}

// TestJournalUnavailable_DegradedOnceBeforeTheNotice: a journal that
// cannot be opened is told degraded once, ahead of the notification that
// tried to open it; the notifications still go out.
func TestJournalUnavailable_DegradedOnceBeforeTheNotice(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	h := &recHost{}
	p := New(Config{Session: "s-1", Key: "k", Journals: registry.NewJournals(0, nil),
		SessionsDir: func() string { return missing }, Host: h})
	p.Notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: "s-1"})
	p.Notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: "s-1"})
	got := h.take()
	if len(got) != 3 || !strings.HasPrefix(got[0], protocol.NotifySessionJournal+" ") ||
		!strings.Contains(got[0], `"state":"degraded","file":"journal"`) || !strings.Contains(got[0], `"sinceSeq":1`) ||
		!strings.HasPrefix(got[1], protocol.NotifySessionExited+" ") || !strings.HasPrefix(got[2], protocol.NotifySessionExited+" ") {
		t.Fatalf("told %q", got)
	}
	if p.Persistence().Journal != protocol.PersistenceDegraded {
		t.Fatalf("persistence %+v", *p.Persistence())
	}
}
