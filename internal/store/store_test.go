package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newRecord(key string) *Record {
	return &Record{
		SessionKey:       key,
		BackendSessionID: "sess-" + key,
		AgentCommand:     "/opt/agents/faultagent normal",
		AgentArgv:        []string{"/opt/agents/faultagent", "normal"},
		Cwd:              "/srv/work",
	}
}

func assertMode(t *testing.T, p string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode %#o, want %#o", p, got, want)
	}
}

// TestOpen_CreatesPrivateDirs: sessions/ and owned/ are 0700, records and
// lock files 0600, even under a permissive umask.
func TestOpen_CreatesPrivateDirs(t *testing.T) {
	s := openTemp(t)
	for _, d := range []string{s.Dir(), s.SessionsDir(), s.OwnedDir()} {
		assertMode(t, d, 0o700)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings on fresh dir: %v", w)
	}
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	assertMode(t, s.RecordPath("k"), 0o600)
	assertMode(t, s.lockPath("k"), 0o600)
	if err := s.WriteOwned(Owned{ID: "o1", Pid: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	assertMode(t, filepath.Join(s.OwnedDir(), "o1.json"), 0o600)
}

// TestOpen_RejectsRelativeStateDir (docs/protocol.md §8 session/open:
// stateDir is an absolute path).
func TestOpen_RejectsRelativeStateDir(t *testing.T) {
	if _, err := Open("state"); err == nil {
		t.Fatal("Open(relative) succeeded")
	}
}

// TestOpen_ReportsButKeepsWideExistingDir: an existing 0755 sessions dir is
// reported, not chmod'ed.
func TestOpen_ReportsButKeepsWideExistingDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "sessions"), 0o755)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Warnings()
	if len(w) == 0 || !strings.Contains(strings.Join(w, "\n"), "sessions") {
		t.Errorf("warnings = %v, want one about sessions", w)
	}
	assertMode(t, filepath.Join(dir, "sessions"), 0o755)
	assertMode(t, filepath.Join(dir, "owned"), 0o700)
}

func TestLoad_MissingIsErrNotFound(t *testing.T) {
	s := openTemp(t)
	if _, err := s.Load("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load = %v, want ErrNotFound", err)
	}
	if err := s.Update("nope", func(*Record) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Update = %v, want ErrNotFound", err)
	}
}

func TestLoad_CorruptIsErrCorrupt(t *testing.T) {
	s := openTemp(t)
	cases := map[string]string{
		"trunc":  `{"schema":"acpx.session.v1","acpx_record_id":"tr`,
		"array":  `[]`,
		"null":   `null`,
		"schema": `{"schema":"acpx.session.v2","acpx_record_id":"schema"}`,
		"other":  `{"schema":"acpx.session.v1","acpx_record_id":"someone-else"}`,
		"types":  `{"schema":"acpx.session.v1","acpx_record_id":"types","last_seq":"x"}`,
	}
	for key, body := range cases {
		if err := os.WriteFile(s.RecordPath(key), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(key); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load(%s) = %v, want ErrCorrupt", key, err)
		}
	}
}

// TestSave_SetsDefaultsAndUpdatedAt: schema, created_at, last_used_at,
// updated_at in TimeLayout, messages [].
func TestSave_SetsDefaultsAndUpdatedAt(t *testing.T) {
	s := openTemp(t)
	fixed := time.Date(2026, 11, 29, 17, 18, 24, 946_123_456, time.FixedZone("X", 3600))
	s.now = func() time.Time { return fixed }
	r := newRecord("k")
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	const want = "2026-11-29T16:18:24.946Z"
	if r.Schema != Schema || r.CreatedAt != want || r.LastUsedAt != want || r.UpdatedAt != want {
		t.Errorf("record after Save: %+v", r)
	}
	var m map[string]any
	b, _ := os.ReadFile(s.RecordPath("k"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if msgs, ok := m["messages"].([]any); !ok || len(msgs) != 0 {
		t.Errorf("messages = %#v, want []", m["messages"])
	}
}

// TestSave_RejectsRecordAcpxCannotRead: acpx drops a record with pid 0,
// negative counts or unknown message shapes, so Save refuses it and leaves
// the previous file alone.
func TestSave_RejectsRecordAcpxCannotRead(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.RecordPath("k"))
	zero, neg := 0, int64(-1)
	bad := []func(r *Record){
		func(r *Record) { r.Pid = &zero },
		func(r *Record) { r.LastSeq = -1 },
		func(r *Record) { r.CumulativeTokenUsage = &TokenUsage{ThoughtTokens: &neg} },
		func(r *Record) { r.Messages = json.RawMessage(`[{"User":{"content":[]}}]`) },
		func(r *Record) { r.Messages = json.RawMessage(`{}`) },
		func(r *Record) { r.Schema = "other" },
		func(r *Record) { r.Acpx.CumulativeCost = &Cost{Amount: -1, Currency: "USD"} },
	}
	for i, f := range bad {
		r := newRecord("k")
		f(r)
		if err := s.Save(r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("case %d: Save = %v, want ErrInvalidRecord", i, err)
		}
		if r.UpdatedAt != "" {
			t.Errorf("case %d: failed Save modified the record", i)
		}
	}
	if after, _ := os.ReadFile(s.RecordPath("k")); string(after) != string(before) {
		t.Error("a rejected Save changed the file")
	}
	if err := s.Save(newRecord(strings.Repeat("/", 100))); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Save(long key) = %v, want ErrInvalidKey", err)
	}
}

// TestSave_InterruptedBeforeRenameKeepsOldRecord simulates a crash between
// writing the temp file and renaming it: the old record stays intact and no
// temp file is left behind (docs/architecture.md, Durability).
func TestSave_InterruptedBeforeRenameKeepsOldRecord(t *testing.T) {
	s := openTemp(t)
	r := newRecord("k")
	r.LastSeq = 1
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.RecordPath("k"))
	crash := errors.New("crash before rename")
	var tmpSeen string
	testHookBeforeRename = func(tmp string) error {
		tmpSeen = tmp
		if b, err := os.ReadFile(tmp); err != nil || !json.Valid(b) {
			t.Errorf("temp file not complete at rename point: %v", err)
		}
		return crash
	}
	defer func() { testHookBeforeRename = nil }()
	r2 := newRecord("k")
	r2.LastSeq = 2
	if err := s.Save(r2); !errors.Is(err, crash) {
		t.Fatalf("Save = %v, want the injected crash", err)
	}
	testHookBeforeRename = nil
	after, _ := os.ReadFile(s.RecordPath("k"))
	if string(after) != string(before) {
		t.Fatal("record changed by an interrupted save")
	}
	if got, err := s.Load("k"); err != nil || got.LastSeq != 1 {
		t.Fatalf("Load after interrupted save = %+v, %v", got, err)
	}
	if _, err := os.Stat(tmpSeen); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp file %s left behind: %v", tmpSeen, err)
	}
	ents, _ := os.ReadDir(s.SessionsDir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("stray temp file %s", e.Name())
		}
	}
}

// TestSave_ReadersNeverSeePartialRecord: two readers load continuously while
// 200 saves of growing records run; every read is a complete record.
func TestSave_ReadersNeverSeePartialRecord(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				b, err := os.ReadFile(s.RecordPath("k"))
				if err != nil || !json.Valid(b) {
					errc <- fmt.Errorf("reader saw invalid record (%v): %.80q", err, b)
					return
				}
				if _, err := s.Load("k"); err != nil {
					errc <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 200 {
		r := newRecord("k")
		r.LastSeq = int64(i)
		r.Title = ptr(strings.Repeat("t", i*50))
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Error("readers never read")
	}
}

// TestUpdate_ConcurrentGoroutinesLoseNothing: 8 goroutines × 25 increments.
func TestUpdate_ConcurrentGoroutinesLoseNothing(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	const g, n = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, g)
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := s.Update("k", func(r *Record) error { r.LastSeq++; return nil }); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	r, err := s.Load("k")
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq != g*n {
		t.Fatalf("LastSeq = %d, want %d", r.LastSeq, g*n)
	}
}

// TestUpdate_ConcurrentProcessesLoseNothing: two re-executed test binaries
// and this process update the same record; flock serialises them.
func TestUpdate_ConcurrentProcessesLoseNothing(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("shared key")); err != nil {
		t.Fatal(err)
	}
	const perChild, local = 100, 50
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = markedEnv(childEnv+"=update", "STORE_TEST_DIR="+s.Dir(),
			"STORE_TEST_KEY=shared key", fmt.Sprintf("STORE_TEST_N=%d", perChild))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for range local {
		if err := s.Update("shared key", func(r *Record) error { r.LastSeq++; return nil }); err != nil {
			t.Error(err)
			break
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
	r, err := s.Load("shared key")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2*perChild + local); r.LastSeq != want {
		t.Fatalf("LastSeq = %d, want %d", r.LastSeq, want)
	}
}

func TestUpdate_FnErrorWritesNothing(t *testing.T) {
	s := openTemp(t)
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.RecordPath("k"))
	boom := errors.New("boom")
	if err := s.Update("k", func(r *Record) error { r.LastSeq = 9; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	if err := s.Update("k", func(r *Record) error { r.SessionKey = "j"; return nil }); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Update changing id = %v", err)
	}
	if after, _ := os.ReadFile(s.RecordPath("k")); string(after) != string(before) {
		t.Fatal("failed Update changed the file")
	}
}

// TestDelete_RemovesRecordAndLock; a missing record is not an error; an
// Update racing a Delete either sees the record or ErrNotFound.
func TestDelete_RemovesRecordAndLock(t *testing.T) {
	s := openTemp(t)
	if err := s.Delete("never"); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
	if err := s.Save(newRecord("k")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("k"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.RecordPath("k"), s.lockPath("k")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists: %v", p, err)
		}
	}
	if _, err := s.Load("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load after Delete = %v", err)
	}
	// Race Save/Update/Delete on one key: nothing but ErrNotFound may fail.
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				var err error
				switch i {
				case 0:
					err = s.Save(newRecord("k"))
				case 1:
					err = s.Update("k", func(r *Record) error { r.LastSeq++; return nil })
				case 2:
					err = s.Delete("k")
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func ptr[T any](v T) *T { return &v }
