//go:build linux

package guardian

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// Roles of Event.Role (the reaper's RoleProvider and RoleDescendant).
const (
	roleProvider   = "provider"
	roleDescendant = "descendant"
)

// Guardian timing (not configurable; the sidecar is gone when they apply).
const (
	// OrphanGrace is the TERM grace the guardian gives the tree
	// after its control pipe hit EOF, before SIGKILL.
	OrphanGrace = 250 * time.Millisecond
	// GiveUp bounds how long an orphaned guardian keeps killing.
	GiveUp = 10 * time.Second
)

// Guardian fd numbers.
const (
	FDCtl    = 3
	FDStatus = 4
)

// Spec is the first control line: what to launch.
type Spec struct {
	Path string `json:"path"` // what to execve (may be /proc/self/fd/N)
	// Argv is the provider's argument vector, argv[0] included.
	Argv []string `json:"argv"`
	// Dir is the provider's working directory ("": the guardian's own).
	Dir        string `json:"dir"`
	Mode       string `json:"mode"`       // the reaper's containment mode
	ExecFD     int    `json:"execFD"`     // -1 if none
	ExecScript bool   `json:"execScript"` // pass ExecFD as the provider's fd 3
	// Sandbox is the sandbox plan as JSON (internal/sandbox), "" for
	// none; Launch is then the sidecar's own image (Options.GuardianPath),
	// the fallback init of a PID namespace (sandbox.InitCommand).
	Sandbox string `json:"sandbox,omitempty"`
	// Launch is the path of the sidecar's own image, set with Sandbox:
	// what a PID namespace's init runs when there is no init program in
	// memory (sandbox.InitCommand).
	Launch string `json:"launch,omitempty"`
	// NetNSFD (> FDStatus) is a network namespace the sandbox plan joins
	// (its JoinNetNS names this number): close-on-exec here, so only the
	// namespace, never the descriptor, reaches the tree.
	NetNSFD int `json:"netnsFD,omitempty"`
}

// Cmd is a later control line.
type Cmd struct {
	Cmd string `json:"cmd"` // "term" or "kill"
}

// Event is one status line.
type Event struct {
	Ev string `json:"ev"` // started, fail, exit, seen, signal, empty
	// Pid is the process the event is about: the provider ("started"),
	// the process reaped ("exit") or found ("seen").
	Pid int `json:"pid,omitempty"`
	// Start is Pid's start time (/proc stat field 22, clock ticks since
	// boot), which tells a recycled pid apart.
	Start uint64 `json:"start,omitempty"`
	// Role is "provider" or "descendant" on an "exit".
	Role string `json:"role,omitempty"`
	// Code is the exit status of an "exit" that ended normally; nil when
	// a signal ended the process (Sig).
	Code *int `json:"code,omitempty"`
	// Sig is a signal name ("SIGKILL"): on "exit" the signal that ended
	// the process, on "signal" the one the guardian sent to the tree.
	Sig string `json:"sig,omitempty"`
	At  int64  `json:"at,omitempty"` // unix ns
	// Msg is the error text of a "fail", or on "signal" the delivery
	// errors joined by "; " ("" if none).
	Msg string `json:"msg,omitempty"`
	// Sandbox marks a "fail" whose cause is the sandbox (the launch
	// entry could not apply it; nothing of the agent ran).
	Sandbox bool `json:"sandbox,omitempty"`
}

// Main runs this process as a provider guardian (see the block comment
// above) and returns its exit code: 0 once the whole tree was reaped, 1
// if it gave up or could not start the provider, 2 if it was not started
// by a Supervisor (fds 3 and 4 are not pipes). args (os.Args[2:]) are
// ignored; everything comes over fd 3. A guardian is a child subreaper
// too; Main makes it one itself.
func Main(args []string) int {
	for _, fd := range []int{FDCtl, FDStatus} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			fmt.Fprintln(os.Stderr, "acpx-sidecar __guardian: internal command; must be started by the sidecar")
			return 2
		}
	}
	g := &guardian{self: os.Getpid(), termed: map[procfs.Key]bool{}, seen: map[procfs.Key]bool{}, leaderGone: make(chan struct{})}
	g.status = os.NewFile(FDStatus, "status")
	ctl := os.NewFile(FDCtl, "control")
	unix.CloseOnExec(FDCtl)
	unix.CloseOnExec(FDStatus)
	// Signals first, so no SIGCHLD or TERM is lost.
	sigch := make(chan os.Signal, 8)
	signal.Notify(sigch, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		g.emit(Event{Ev: "fail", Msg: "prctl(PR_SET_CHILD_SUBREAPER): " + err.Error()})
		return 1
	}
	rd := bufio.NewReader(ctl)
	line, err := rd.ReadBytes('\n')
	var spec Spec
	if err == nil {
		err = json.Unmarshal(line, &spec)
	}
	if err != nil {
		g.emit(Event{Ev: "fail", Msg: "bad launch spec: " + err.Error()})
		return 1
	}
	g.spec = spec
	if spec.NetNSFD > FDStatus {
		unix.CloseOnExec(spec.NetNSFD)
	}
	if spec.ExecFD > FDStatus {
		unix.CloseOnExec(spec.ExecFD)
	}
	if err := g.launch(); err != nil {
		g.emit(Event{Ev: "fail", Msg: err.Error(), Sandbox: errors.Is(err, launchexec.ErrSandbox)})
		return 1
	}
	// The provider holds its stdio now; drop ours so EOF reaches the sidecar
	// only when the tree is gone.
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			unix.Dup3(null, fd, 0)
		}
		unix.Close(null)
	}
	if spec.ExecFD > FDStatus {
		unix.Close(spec.ExecFD)
	}
	if spec.NetNSFD > FDStatus {
		unix.Close(spec.NetNSFD) // the tree is in it; the guardian needs it no more
	}

	cmds := make(chan string, 4)
	go func() {
		defer close(cmds)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			var c Cmd
			if json.Unmarshal(line, &c) == nil {
				cmds <- c.Cmd
			}
		}
	}()
	return g.loop(cmds, sigch)
}

type guardian struct {
	spec   Spec
	self   int
	status *os.File

	leader       procfs.Key
	leaderFD     int
	leaderReaped bool
	initCtl      *sandbox.InitConn   // the PID-namespace init's control socket, nil without one
	leaderGone   chan struct{}       // closed when the leader is reaped
	termed       map[procfs.Key]bool // got SIGTERM in this phase
	seen         map[procfs.Key]bool // reported as "seen"

	phase    int // 0 none, 1 TERM, 2 KILL
	orphaned bool
	killAt   time.Time // orphaned: when TERM escalates to KILL
	giveUpAt time.Time
}

func (g *guardian) emit(ev Event) {
	b, _ := json.Marshal(ev)
	// EPIPE once the sidecar is gone; nothing to do about it.
	_, _ = g.status.Write(append(b, '\n'))
}

func (g *guardian) loop(cmds <-chan string, sigch <-chan os.Signal) int {
	// The ticker runs only once a TERM/KILL phase began: it catches
	// newcomers and escalates; an idle guardian sleeps on SIGCHLD and fd 3.
	var tickC <-chan time.Time
	startTick := func() {
		if tickC == nil {
			t := time.NewTicker(10 * time.Millisecond)
			tickC = t.C
		}
	}
	orphan := func() {
		if g.orphaned {
			return
		}
		g.orphaned = true
		now := time.Now()
		g.killAt, g.giveUpAt = now.Add(OrphanGrace), now.Add(GiveUp)
		if g.phase < 1 {
			g.phase = 1
			g.signalTree(unix.SIGTERM)
		}
		startTick()
	}
	for {
		if g.reap() {
			return 0
		}
		select {
		case s := <-sigch:
			if s != unix.SIGCHLD {
				orphan()
			}
		case c, ok := <-cmds:
			if !ok {
				cmds = nil
				orphan()
				continue
			}
			startTick()
			switch c {
			case "term":
				if g.phase < 1 {
					g.phase = 1
				}
				g.emit(Event{Ev: "signal", Sig: "SIGTERM", Msg: g.signalTree(unix.SIGTERM)})
			case "kill":
				g.phase = 2
				g.emit(Event{Ev: "signal", Sig: "SIGKILL", Msg: g.signalTree(unix.SIGKILL)})
			}
		case now := <-tickC:
			switch {
			case g.orphaned && now.After(g.giveUpAt):
				return 1
			case g.orphaned && g.phase == 1 && now.After(g.killAt):
				g.phase = 2
				g.signalTree(unix.SIGKILL)
			case g.phase == 1:
				g.signalTree(unix.SIGTERM) // newcomers only
			case g.phase == 2:
				g.signalTree(unix.SIGKILL) // until the tree is empty
			}
		}
	}
}

// reap collects every exited child and reports it; true once the guardian
// has no child at all. As a child subreaper, "no child" means no
// descendant: an orphan is re-parented to us before its parent becomes a
// zombie.
func (g *guardian) reap() bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			g.emit(Event{Ev: "empty", At: time.Now().UnixNano()})
			return true
		}
		if err != nil {
			return false
		}
		pid := procfs.SiginfoPid(&info)
		if pid <= 0 {
			return false
		}
		p, _ := procfs.ReadStat(pid)
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil || wpid != pid {
			continue
		}
		ev := Event{Ev: "exit", Pid: pid, Start: p.Start, Role: roleDescendant, At: time.Now().UnixNano()}
		if pid == g.leader.Pid {
			ev.Role, ev.Start = roleProvider, g.leader.Start
			g.leaderReaped = true
			close(g.leaderGone) // the init is told, and leaves once the namespace is empty
			if g.leaderFD >= 0 {
				unix.Close(g.leaderFD)
				g.leaderFD = -1
			}
		}
		if ws.Signaled() {
			ev.Sig = unix.SignalName(ws.Signal())
		} else {
			c := ws.ExitStatus()
			ev.Code = &c
		}
		g.emit(ev)
	}
}

// signalTree sends sig to the whole tree: the provider's process group
// while the leader is unreaped (we are its only reaper and reap on this
// goroutine, so the id is pinned, docs/rules.md#r22), and every live
// process with this guardian as ancestor, through signalPinned. SIGTERM
// goes once per process. Each process found is reported ("seen") before
// any signal is sent: inside a PID namespace the tree's init, not the
// guardian, reaps what the group signal ends, and the proof must still
// name it. It returns delivery errors joined by "; " ("" if none).
func (g *guardian) signalTree(sig unix.Signal) string {
	var errs []string
	snap := procfs.Scan()
	children := map[int][]int{}
	for pid, p := range snap {
		children[p.PPid] = append(children[p.PPid], pid)
	}
	var live []procfs.Key
	queue := append([]int(nil), children[g.self]...)
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		queue = append(queue, children[pid]...)
		p := snap[pid]
		if p.State == 'Z' {
			continue
		}
		k := procfs.Key{Pid: pid, Start: p.Start}
		if !g.seen[k] && k != g.leader {
			// Named in the proof even if its own parent reaps it.
			g.seen[k] = true
			g.emit(Event{Ev: "seen", Pid: k.Pid, Start: k.Start})
		}
		live = append(live, k)
	}
	if !g.leaderReaped {
		if err := unix.Kill(-g.leader.Pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Sprintf("process group %d: %v", g.leader.Pid, err))
		}
	}
	for _, k := range live {
		if sig == unix.SIGTERM {
			if g.termed[k] {
				continue
			}
			g.termed[k] = true
		}
		if _, err := procfs.SignalPinned(k, sig, nil); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return strings.Join(errs, "; ")
}
