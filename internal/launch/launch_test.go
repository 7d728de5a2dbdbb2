package launch

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func TestE2bigField_BlamesTheLargerPart(t *testing.T) {
	if f := e2bigField([]string{strings.Repeat("a", maxArgStrlen)}, nil); f != "command.args" {
		t.Fatalf("one huge arg: %q", f)
	}
	if f := e2bigField([]string{"x"}, []string{"K=" + strings.Repeat("v", 100)}); f != "env" {
		t.Fatalf("larger env: %q", f)
	}
	if f := e2bigField([]string{strings.Repeat("a", 100)}, []string{"K=v"}); f != "command.args" {
		t.Fatalf("larger args: %q", f)
	}
}

func TestStoreRetryable_ShapeErrorsAreNot(t *testing.T) {
	if storeRetryable(store.ErrNotDirectory) || storeRetryable(syscall.ENOTDIR) {
		t.Fatal("a wrong shape is not retryable")
	}
	if !storeRetryable(syscall.EIO) {
		t.Fatal("an I/O error is retryable")
	}
	pe := &os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}
	if got := ErrText(pe); got != "open /x: "+syscall.EACCES.Error() {
		t.Fatalf("ErrText: %q", got)
	}
}

func TestReasons_NameTheFailure(t *testing.T) {
	e := protocol.Domain(protocol.ErrStoreUnavailable, "x", true)
	if got := BeforeLaunchReason(e); got != "admission failed before launch: the state directory could not be used (STORE_UNAVAILABLE)" {
		t.Fatalf("before launch: %q", got)
	}
	if got := launchedReason(protocol.Domain(protocol.ErrAdmissionAborted, "x", false)); got != "admission aborted" {
		t.Fatalf("launched: %q", got)
	}
}

func TestSameRulesAsOpen_FirstRecordsThenChecks(t *testing.T) {
	var open []sandbox.Rule
	if e := sameRulesAsOpen(&open, nil, "", ""); e != nil || open == nil {
		t.Fatalf("first launch: %v %v", e, open)
	}
	open = []sandbox.Rule{{Path: "/w", Dev: 1, Ino: 2}}
	if e := sameRulesAsOpen(&open, []sandbox.Rule{{Path: "/w", Dev: 1, Ino: 2}, {Path: "/tmpdir", Dev: 9}}, "/tmpdir", ""); e != nil {
		t.Fatalf("same rules: %v", e)
	}
	e := sameRulesAsOpen(&open, []sandbox.Rule{{Path: "/w", Dev: 1, Ino: 3}}, "", "")
	if e == nil || e.Data.Code != protocol.ErrSandboxConflict || len(e.Data.Paths) != 1 {
		t.Fatalf("moved rule: %+v", e)
	}
}

// failingLauncher refuses every Start with err.
type failingLauncher struct{ err error }

func (l failingLauncher) Start(reaper.Spec) (Tree, error) { return nil, l.err }
func (failingLauncher) Mode() reaper.Mode                 { return reaper.ModeProcessGroup }
func (failingLauncher) Seal()                             {}
func (failingLauncher) CgroupParent() string              { return "" }

// stepsSession records the steps Admit takes; only the steps before the
// launch are expected.
type stepsSession struct {
	steps    []string
	released bool
}

func (s *stepsSession) Prepare(context.Context, *Input) (*provstate.State, *protocol.Restore, *protocol.Error) {
	s.steps = append(s.steps, "prepare")
	return nil, nil, nil
}
func (s *stepsSession) TakeTreeSlot(context.Context) (func(), *protocol.Error) {
	s.steps = append(s.steps, "slot")
	return func() { s.released = true }, nil
}
func (s *stepsSession) LedgerBeforeLaunch(st *store.Store) (*store.Pending, error) {
	s.steps = append(s.steps, "ledger")
	return st.WriteOwnedDeferred(store.Owned{ID: "s1", Session: "s1"})
}
func (s *stepsSession) RecordTree(*store.Store, Tree, *store.Pending) { panic("no tree") }
func (s *stepsSession) Started(Tree, *acpclient.StderrTail) *acpclient.Conn {
	panic("no tree")
}
func (s *stepsSession) Replaying(bool)                       { panic("no handshake") }
func (s *stepsSession) Cleanup(CleanupInput) *protocol.Proof { panic("no tree") }
func (s *stepsSession) CloseLate(*acpclient.Conn, Tree, string) cleanup.CloseResult {
	panic("no tree")
}
func (s *stepsSession) Cancelled(context.Context) *protocol.Error { panic("not cancelled") }

func TestAdmit_FailedStartLaunchesNothingAndRemovesTheEntry(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ss := &stepsSession{}
	w := Worker{ID: "s1", Key: "k", Log: zap.NewNop(), Clean: func(s string) string { return s },
		Launcher: failingLauncher{err: reaper.ErrSealed}, Session: ss}
	p := protocol.OpenParams{SessionKey: "k", Cwd: t.TempDir(), Command: &protocol.Command{Path: "/bin/true"}}
	r := w.Admit(context.Background(), Input{Open: p, Store: st})
	if r.Adm != nil || r.Proof != nil || r.Err == nil || r.Err.Data.Code != protocol.ErrShuttingDown {
		t.Fatalf("result: %+v", r)
	}
	if got := strings.Join(ss.steps, ","); got != "prepare,slot,ledger" || !ss.released {
		t.Fatalf("steps %q, slot released %v", got, ss.released)
	}
	if left, err := st.ListOwned(); err != nil || len(left) != 0 {
		t.Fatalf("ledger entries left: %v %v", left, err)
	}
}
