package provstate

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// sidecar is one sidecar's side of a key: its state store handle (a
// file:// store shared by every sidecar of a test), its state dir and the
// key's provider-state directory there.
type sidecar struct {
	k   Session
	st  *store.Store
	src []statestore.Source
}

func newSidecars(t *testing.T, ids ...string) []sidecar {
	t.Helper()
	b := make([]byte, statestore.KeySize)
	_, _ = rand.Read(b)
	mk, err := statestore.NewMasterKey(b)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.Join(t.TempDir(), "store")
	var out []sidecar
	for _, id := range ids {
		ss, err := statestore.Open(context.Background(), statestore.Options{URL: url, Key: mk,
			Owner: statestore.Owner{SidecarID: id, Hostname: "h-" + id}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(t.TempDir(), "state"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st.RecordPath("k"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		home := filepath.Join(t.TempDir(), "agent-home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		out = append(out, sidecar{
			k:   Session{States: ss, Key: "k", Log: zap.NewNop(), Clean: strings.ToUpper, JournalMaxBytes: 1 << 20},
			st:  st,
			src: []statestore.Source{{Name: "agent", Path: home}},
		})
	}
	return out
}

// TestPublishAcquireFence_KeyMovesAndTheOldOwnerIsFenced: A publishes
// its provider state; B's open takes the key over and restores it (the
// journal with the move's gap); A's next publication fails STATE_FENCED
// (redacted by Clean), every later one is skipped without touching the
// store, and A's revive check refuses (docs/protocol.md §24).
func TestPublishAcquireFence_KeyMovesAndTheOldOwnerIsFenced(t *testing.T) {
	ctx := context.Background()
	sc := newSidecars(t, "A", "B")
	a, b := sc[0], sc[1]
	la, r, e := a.k.Acquire(ctx, a.st, profiles.Profile{}, a.src)
	if e != nil || r != nil {
		t.Fatalf("A's acquire: restored %v, %v", r, e)
	}
	psA := New(la, a.src)
	if err := os.WriteFile(filepath.Join(a.src[0].Path, "session.json"), []byte("a's session"), 0o600); err != nil {
		t.Fatal(err)
	}
	ja, err := journal.Open(a.st.SessionsDir(), "k", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ja.AppendNotice("session/update", []byte(`{}`))
	if err := ja.Close(); err != nil {
		t.Fatal(err)
	}
	pub := a.k.Publish(ctx, psA, a.st, true)
	if pub == nil || pub.State != protocol.PublicationPublished || pub.Generation == 0 {
		t.Fatalf("A's publication %+v", pub)
	}
	if g := localGeneration(a.st, "k"); g != pub.Generation {
		t.Errorf("A's marker %d, want %d", g, pub.Generation)
	}
	if again := a.k.Publish(ctx, psA, a.st, true); again.State != protocol.PublicationSkipped || again.Error != nil {
		t.Errorf("a publication with the store current: %+v, want skipped", again)
	}
	if s := Status(psA); s == nil || s.Owner.SidecarID != "A" || s.PublishedAt == nil {
		t.Errorf("A's status %+v", s)
	}

	lb, r, e := b.k.Acquire(ctx, b.st, profiles.Profile{}, b.src)
	if e != nil || r == nil || r.Generation != pub.Generation {
		t.Fatalf("B's acquire: restored %+v, %v; want generation %d", r, e, pub.Generation)
	}
	if got, _ := os.ReadFile(filepath.Join(b.src[0].Path, "session.json")); string(got) != "a's session" {
		t.Errorf("B's restored state %q", got)
	}
	seg, _ := os.ReadFile(journal.SegmentPath(b.st.SessionsDir(), journal.Stem("k"), 0))
	if !strings.Contains(string(seg), "session/update") || !strings.Contains(string(seg), `"toN":`+strconv.Itoa(1+movedJournalGap)) {
		t.Errorf("the moved journal lacks A's entry or the move's gap of %d: %s", movedJournalGap, seg)
	}
	if Status(New(lb, b.src)).Owner.SidecarID != "B" {
		t.Error("B does not own the head")
	}

	psA.TreeLaunched()
	pub = a.k.Publish(ctx, psA, a.st, false)
	if pub.State != protocol.PublicationFailed || pub.Error == nil || pub.Error.Code != protocol.ErrStateFenced {
		t.Fatalf("A's publication after the takeover %+v", pub)
	}
	if pub.Error.Message != strings.ToUpper(pub.Error.Message) {
		t.Errorf("the failure's message %q did not go through Clean", pub.Error.Message)
	}
	proof := &protocol.Proof{Publication: pub}
	if !Fenced(proof) {
		t.Error("Fenced: false for a STATE_FENCED publication")
	}
	if pub = a.k.Publish(ctx, psA, a.st, false); pub.State != protocol.PublicationSkipped || pub.Error.Code != protocol.ErrStateFenced {
		t.Errorf("a fenced lease's next publication %+v, want skipped STATE_FENCED", pub)
	}
	if e := a.k.VerifyLease(ctx, psA); e == nil || e.Data.Code != protocol.ErrStateFenced {
		t.Errorf("A's revive check %v, want STATE_FENCED", e)
	}
	if pub := a.k.Discard(ctx, psA, a.st); pub.State != protocol.PublicationSkipped || pub.Error != nil {
		t.Errorf("a fenced lease's discard %+v, want skipped (the new owner's head untouched)", pub)
	}
	if s := Status(New(lb, b.src)); s.Owner.SidecarID != "B" {
		t.Errorf("the head after A's attempts: %+v", s)
	}
}

// TestDropLocalRestoreForRevive_ParkedStateComesBack: a published retire
// drops the private-HOME state (PrivateDirs, DropLocal) and forgets the
// marker; the revive restores it with the session's own lease.
func TestDropLocalRestoreForRevive_ParkedStateComesBack(t *testing.T) {
	ctx := context.Background()
	a := newSidecars(t, "A")[0]
	home, err := a.st.Home("k")
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(home, ".agent")
	if err := os.MkdirAll(agent, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agent, "f"), []byte("state"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.src = []statestore.Source{{Name: "agent", Path: agent}, {Name: "outside", Path: t.TempDir()}}
	l, _, e := a.k.Acquire(ctx, a.st, profiles.Profile{}, a.src)
	if e != nil {
		t.Fatal(e)
	}
	ps := New(l, a.src)
	if e := a.k.RestoreForRevive(ctx, ps, a.st); e != nil {
		t.Fatalf("nothing published yet: %v", e)
	}
	if pub := a.k.Publish(ctx, ps, a.st, true); pub.State != protocol.PublicationPublished {
		t.Fatalf("publication %+v", pub)
	}
	rels := PrivateDirs(ps, home)
	if len(rels) != 1 || rels[0] != ".agent" {
		t.Fatalf("PrivateDirs %q, want [.agent]", rels)
	}
	if PrivateDirs(nil, home) != nil || PrivateDirs(ps, "") != nil {
		t.Error("PrivateDirs without a store or a private HOME: not nil")
	}
	a.k.DropLocal(a.st, rels)
	if _, err := os.Lstat(agent); !os.IsNotExist(err) {
		t.Fatalf("the dropped state is still there: %v", err)
	}
	if localGeneration(a.st, "k") != 0 {
		t.Error("the marker survived the drop")
	}
	if e := a.k.RestoreForRevive(ctx, ps, a.st); e != nil {
		t.Fatal(e)
	}
	if got, _ := os.ReadFile(filepath.Join(agent, "f")); string(got) != "state" {
		t.Errorf("restored %q", got)
	}
	if e := a.k.VerifyLease(ctx, ps); e != nil {
		t.Errorf("own lease's check: %v", e)
	}
	if pub := a.k.Discard(ctx, ps, a.st); pub.State != protocol.PublicationSkipped || pub.Error != nil {
		t.Errorf("discard %+v", pub)
	}
	if h, err := a.k.States.ReadHead(ctx, "k"); !errors.Is(err, statestore.ErrNotFound) {
		t.Errorf("the key's head after its discard: %+v, %v; want none", h, err)
	}
	if _, err := os.Lstat(localMarkerPath(a.st, "k")); !os.IsNotExist(err) {
		t.Errorf("the marker survived the discard: %v", err)
	}
}

// TestNoStore_StepsAreNoOps: without a store (or a lease) the steps do
// nothing and answer nil.
func TestNoStore_StepsAreNoOps(t *testing.T) {
	ctx := context.Background()
	k := Session{Key: "k", Log: zap.NewNop()}
	var ps *State
	if k.Publish(ctx, ps, nil, true) != nil || k.Discard(ctx, ps, nil) != nil || k.RestoreForRevive(ctx, ps, nil) != nil ||
		k.VerifyLease(ctx, ps) != nil || Status(ps) != nil {
		t.Error("a step without a store did something")
	}
	ps.TreeLaunched() // nil-safe
}

// TestSources_RefusesWhatNoArchiveMayCarry: a provider-state directory
// that is a system directory, holds the workspace, or lies in a state dir
// (but for the key's private HOME) or a secret is refused STATE_CONFLICT
// with data.paths; one of the profile's resolves in the launch
// environment (docs/protocol.md §24).
func TestSources_RefusesWhatNoArchiveMayCarry(t *testing.T) {
	root := t.TempDir()
	stateDir, cwd, secret := filepath.Join(root, "a", "state"), filepath.Join(root, "work"), filepath.Join(root, "key")
	private := filepath.Join(stateDir, "homes", "k")
	base := Dirs{Cwd: cwd, PrivateHome: private, StateDirs: []string{stateDir}, Secrets: []string{secret}}
	for _, c := range []struct{ name, dir string }{
		{"system", "/etc"},
		{"workspace", root},
		{"state dir", filepath.Join(stateDir, "sessions")},
		{"holds a state dir", filepath.Join(root, "a")},
		{"secret", secret},
	} {
		d := base
		d.Named = map[string]string{"x": c.dir}
		srcs, e := Sources(d)
		if e == nil || e.Data.Code != protocol.ErrStateConflict || len(e.Data.Paths) != 1 {
			t.Errorf("%s (%s): %v, %v; want STATE_CONFLICT with the path", c.name, c.dir, srcs, e)
		}
	}
	d := base
	d.Named = map[string]string{"x": filepath.Join(private, ".agent")}
	if srcs, e := Sources(d); e != nil || len(srcs) != 1 || !srcs[0].Strict {
		t.Errorf("inside the private HOME: %v, %v; want allowed, Strict", srcs, e)
	}
	prof, _ := profiles.Lookup("codex")
	d = base
	d.Profile = prof
	d.Env = []string{"CODEX_HOME=/nowhere", "CODEX_HOME=" + filepath.Join(root, "codex")}
	srcs, e := Sources(d)
	if e != nil || len(srcs) == 0 || srcs[0].Path != filepath.Join(root, "codex") {
		t.Errorf("the profile's dir in the launch env: %+v, %v", srcs, e)
	}
}
