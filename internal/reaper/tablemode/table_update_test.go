//go:build linux || darwin

package tablemode

import (
	"errors"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
)

// These tests drive Tree.update with made-up process tables, so each
// membership rule of ModeProcessTable (and the gap it documents) is
// checked exactly, without racing real processes.

func testTableTree() *Tree {
	t := &Tree{id: treeID{pid: 100, pgid: 100, start: 1000}, marker: "M=1", members: map[tableKey]*tableMember{}, exited: make(chan struct{})}
	t.addLocked(tableKey{100, 1000}, time.Unix(0, 0))
	return t
}

func scanOf(at time.Time, marked []int, t *Tree, procs ...proctable.Proc) *tableScan {
	s := newTableScan(at, procs, -1)
	s.marked = map[*Tree][]int{t: marked}
	return s
}

// livePids lists the live members of t in s, sorted.
func livePids(t *Tree, s *tableScan) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for _, k := range t.liveLocked(s) {
		out = append(out, k.pid)
	}
	sort.Ints(out)
	return out
}

func TestTableUpdate_MembershipRules(t *testing.T) {
	tr := testTableTree()
	at := time.Unix(10, 0)
	s := scanOf(at, []int{110}, tr,
		proctable.Proc{Pid: 100, PPid: 50, Pgid: 100, Start: 1000},  // the leader
		proctable.Proc{Pid: 101, PPid: 1, Pgid: 100, Start: 1005},   // orphan in the group
		proctable.Proc{Pid: 103, PPid: 100, Pgid: 200, Start: 1001}, // child that left the group
		proctable.Proc{Pid: 104, PPid: 103, Pgid: 200, Start: 1002}, // its child
		proctable.Proc{Pid: 108, PPid: 100, Pgid: 300, Start: 900},  // "child" older than its parent: a recycled link
		proctable.Proc{Pid: 110, PPid: 1, Pgid: 110, Start: 1010},   // orphan with the marker, own session
		proctable.Proc{Pid: 111, PPid: 1, Pgid: 111, Start: 1011},   // orphan, own session, no marker: the gap
		proctable.Proc{Pid: 112, PPid: 100, Pgid: 100, Start: 1012, Zombie: true},
		proctable.Proc{Pid: 120, PPid: 1, Pgid: 120, Start: 20}, // unrelated
	)
	tr.update(s)
	if got, want := livePids(tr, s), []int{100, 101, 103, 104, 110}; !reflect.DeepEqual(got, want) {
		t.Fatalf("live members %v, want %v (111 is the documented gap: no group, no marker, no chain)", got, want)
	}
	if m := tr.members[tableKey{112, 1012}]; m == nil || !m.dead {
		t.Fatalf("zombie child of the leader: %+v, want a dead member", m)
	}
}

func TestTableUpdate_GroupOnlyWhilePinned(t *testing.T) {
	tr := testTableTree()
	tr.leaderReaped = true // the leader's pid, and so the group id, are free
	at := time.Unix(10, 0)
	s := scanOf(at, nil, tr, proctable.Proc{Pid: 102, PPid: 1, Pgid: 100, Start: 2000})
	tr.update(s)
	if got := livePids(tr, s); len(got) != 0 {
		t.Fatalf("live members %v: a process in a recycled group id was adopted", got)
	}
	// A live member in the group pins it again: its group mates belong.
	tr2 := testTableTree()
	tr2.leaderReaped = true
	tr2.addLocked(tableKey{101, 1005}, time.Unix(1, 0))
	s2 := scanOf(at, nil, tr2,
		proctable.Proc{Pid: 101, PPid: 1, Pgid: 100, Start: 1005},
		proctable.Proc{Pid: 102, PPid: 1, Pgid: 100, Start: 1006})
	tr2.update(s2)
	if got, want := livePids(tr2, s2), []int{101, 102}; !reflect.DeepEqual(got, want) {
		t.Fatalf("live members %v, want %v", got, want)
	}
}

func TestTableUpdate_RecycledPidIsNotAMember(t *testing.T) {
	tr := testTableTree()
	tr.addLocked(tableKey{106, 1003}, time.Unix(1, 0))
	at := time.Unix(10, 0)
	s := scanOf(at, nil, tr,
		proctable.Proc{Pid: 106, PPid: 1, Pgid: 106, Start: 5000}, // 106 recycled
		proctable.Proc{Pid: 107, PPid: 106, Pgid: 106, Start: 5001})
	tr.update(s)
	if got := livePids(tr, s); len(got) != 0 {
		t.Fatalf("live members %v: the recycled pid (or its child) was taken for the member", got)
	}
	for _, k := range []tableKey{{100, 1000}, {106, 1003}} {
		if m := tr.members[k]; m == nil || !m.dead {
			t.Fatalf("member %v absent from the table: %+v, want dead", k, m)
		}
	}
}

func TestTableUpdate_MemberFoundAfterTheScanBeganCountsLive(t *testing.T) {
	tr := testTableTree()
	at := time.Unix(10, 0)
	s := scanOf(at, nil, tr, proctable.Proc{Pid: 100, PPid: 50, Pgid: 100, Start: 1000})
	tr.addLocked(tableKey{130, 1100}, at.Add(time.Millisecond)) // known only after the read began
	tr.update(s)
	if got, want := livePids(tr, s), []int{100, 130}; !reflect.DeepEqual(got, want) {
		t.Fatalf("live members %v, want %v", got, want)
	}
}

// fakeEnv is a proctable.Reader whose Environ answers from a map (a
// missing pid fails, a pid in block waits for its channel to close) and
// counts its calls; List and Stat are unused.
type fakeEnv struct {
	mu    sync.Mutex
	env   map[int][]string
	fail  map[int]int // pid -> failures still to return before env[pid]
	block map[int]chan struct{}
	calls map[int]int
}

func (f *fakeEnv) List() ([]proctable.Proc, error)  { return nil, nil }
func (f *fakeEnv) Stat(int) (proctable.Proc, error) { return proctable.Proc{}, proctable.ErrNotFound }
func (f *fakeEnv) Environ(pid int) ([]string, error) {
	f.mu.Lock()
	f.calls[pid]++
	ch := f.block[pid]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[pid] > 0 {
		f.fail[pid]--
		return nil, errors.New("EIO")
	}
	if e, ok := f.env[pid]; ok {
		return e, nil
	}
	return nil, errors.New("EINVAL")
}

func procsAt(i int, pids ...int) *tableScan {
	var l []proctable.Proc
	for _, pid := range pids {
		l = append(l, proctable.Proc{Pid: pid, Start: 1})
	}
	return newTableScan(time.Unix(int64(i), 0), l, -1)
}

// TestEnvReader_ReadsEachEnvironmentOnceAndGivesUpOnUnreadable: a readable
// environment is read once per process; a transient failure is retried and
// the marker then found; a process whose environment never reads (another
// user's), or reads empty (as mid-execve on Linux), is tried envTries
// times, then left alone.
func TestEnvReader_ReadsEachEnvironmentOnceAndGivesUpOnUnreadable(t *testing.T) {
	tr := testTableTree()
	f := &fakeEnv{env: map[int][]string{10: {"A=1", "M=1"}, 11: {"M=1"}, 12: {"M=2"}, 14: {}},
		fail: map[int]int{11: 1}, calls: map[int]int{}}
	r := newEnvReader(f, zap.NewNop())
	defer r.close()
	markers := map[string]*Tree{"M=1": tr}
	var got []int
	for i := 0; i < envTries+2; i++ {
		got = r.marked(procsAt(i, 10, 11, 12, 13, 14), func(e string) *Tree { return markers[e] }, []string{"M="}, 5*time.Second)[tr]
	}
	sort.Ints(got)
	if !reflect.DeepEqual(got, []int{10, 11}) {
		t.Fatalf("marked %v, want [10 11]", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := map[int]int{10: 1, 11: 2, 12: 1, 13: envTries, 14: envTries}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("environment reads %v, want %v", f.calls, want)
	}
}

// TestEnvReader_StuckReadDoesNotStallTheScan: a read that blocks (the
// target holds its memory lock) costs a scan at most its wait; the other
// processes' markers are found meanwhile, and the stuck one's once its read
// returns.
func TestEnvReader_StuckReadDoesNotStallTheScan(t *testing.T) {
	tr := testTableTree()
	release := make(chan struct{})
	f := &fakeEnv{env: map[int][]string{20: {"M=1"}, 21: {"M=1"}}, block: map[int]chan struct{}{21: release},
		calls: map[int]int{}}
	r := newEnvReader(f, zap.NewNop())
	defer r.close()
	markers := map[string]*Tree{"M=1": tr}
	start := time.Now()
	got := r.marked(procsAt(0, 20, 21), func(e string) *Tree { return markers[e] }, []string{"M="}, 50*time.Millisecond)[tr]
	if took := time.Since(start); !reflect.DeepEqual(got, []int{20}) || took > 5*time.Second {
		t.Fatalf("with 21's read stuck: marked %v after %v, want [20] within the wait", got, took)
	}
	close(release)
	got = r.marked(procsAt(1, 20, 21), func(e string) *Tree { return markers[e] }, []string{"M="}, 5*time.Second)[tr]
	sort.Ints(got)
	if !reflect.DeepEqual(got, []int{20, 21}) {
		t.Fatalf("after the read returned: marked %v, want [20 21]", got)
	}
}
