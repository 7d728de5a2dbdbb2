//go:build linux

package launchexec

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// BenchmarkLaunch measures what starting a program costs with each way
// of launching it (docs/architecture.md, "Kernel sandbox"): /bin/true
// run directly; through the launch entry (a Go start of this binary and
// a second execve: what cgroup v1 limits cost); and forked by
// sandbox.Start under a workspace plan without and with the layers
// against root (a PID namespace with its init and a fresh /proc, no
// capabilities, the seccomp filter, new user namespaces refused). ns/op
// is fork to the program's reaped exit (and, with a PID namespace, the
// init's). The sandboxed cases need root and Landlock.
func BenchmarkLaunch(b *testing.B) {
	work := b.TempDir()
	plans := map[string]*sandbox.Plan{}
	for name, pol := range map[string]sandbox.Policy{
		"workspace": {Filesystem: sandbox.Workspace, Network: sandbox.NetAll, Signals: sandbox.OwnTree,
			Processes: sandbox.AllProcesses, Capabilities: sandbox.CapsKeep},
		"workspace+root": {Filesystem: sandbox.Workspace, Network: sandbox.NetAll, Signals: sandbox.OwnTree,
			Processes: sandbox.OwnTreeProcesses, Capabilities: sandbox.CapsNone},
	} {
		plan, _, err := sandbox.Build(pol, sandbox.Paths{Cwd: work}, sandbox.BuildOptions{BindReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if name == "workspace" {
			plan.Seccomp, plan.DenyUserNS = false, false // Landlock and no_new_privs only: the launch before issue 30
		}
		plans[name] = &plan
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	for _, name := range []string{"direct", "entry", "workspace", "workspace+root"} {
		b.Run(name, func(b *testing.B) {
			if plans[name] != nil {
				if c := sandbox.Probe(); !c.Filesystem() || !c.PIDNamespace {
					b.Skipf("needs root and Landlock: %+v", c)
				}
			}
			for i := 0; i < b.N; i++ {
				switch name {
				case "direct":
					if err := exec.Command("/bin/true").Run(); err != nil {
						b.Fatal(err)
					}
				case "entry":
					r, w, err := os.Pipe()
					if err != nil {
						b.Fatal(err)
					}
					cmd := exec.Command(os.Args[0], Arg, "status=3", "--", "/bin/true", "true")
					cmd.ExtraFiles = []*os.File{w}
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					w.Close()
					r.Close()
					if err := cmd.Wait(); err != nil {
						b.Fatal(err)
					}
				default:
					launchSandboxed(b, plans[name], null)
				}
			}
		})
	}
}

// launchSandboxed runs /bin/true under plan through sandbox.Start and
// waits for it and its init (answered as the reaper answers it).
func launchSandboxed(b *testing.B, plan *sandbox.Plan, null *os.File) {
	conn, err := sandbox.NewInitConn()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	st, err := sandbox.Start(plan, sandbox.Forks{
		Init: func() (int, error) {
			path, argv, _ := sandbox.InitCommand("/proc/self/exe")
			return syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: "/",
				Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), conn.ChildFD()}})
		},
		Agent: func(int) (int, error) {
			return syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}})
		},
	})
	conn.CloseChild()
	if err != nil {
		b.Fatal(err)
	}
	agentGone := make(chan struct{})
	served := make(chan struct{})
	go func() { defer close(served); conn.Serve(func() {}, agentGone) }()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(st.AgentPid, &ws, 0, nil); err != nil {
		b.Fatal(err)
	}
	close(agentGone)
	if st.InitPid > 0 {
		if _, err := syscall.Wait4(st.InitPid, &ws, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
	<-served
}
