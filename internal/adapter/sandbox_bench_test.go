package adapter

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// BenchmarkOpenSandbox measures what a kernel sandbox adds to a
// session/open (docs/architecture.md, "Kernel sandbox"): open (launch +
// handshake + record) of the fault agent, then close with a proof, with
// filesystem off, workspace and strict, in cgroup mode. ms/open is the
// open alone (the launch entry's Go start, the ruleset, the execve
// included), measured around each open; ns/op is the whole cycle.
func BenchmarkOpenSandbox(b *testing.B) {
	for _, fs := range []string{sandbox.Off, sandbox.Workspace, sandbox.Strict} {
		b.Run(fs, func(b *testing.B) {
			m, sup := benchManager(b, reaper.ModeCgroup)
			m.sh.Config.Sandbox = admission.SandboxConfig{Default: sandbox.Off, Caps: sandbox.Probe(), Protected: sandbox.CgroupMounts()}
			if fs != sandbox.Off && !m.sh.Config.Sandbox.Caps.Filesystem() {
				b.Skip("no Landlock filesystem sandbox on this kernel")
			}
			cwd := b.TempDir()
			var opening time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				open := call(b, func(r func(any, error)) {
					m.Open(context.Background(), protocol.OpenParams{SessionKey: "sb-" + strconv.Itoa(i), Agent: "generic",
						Command: &protocol.Command{Path: faultAgent}, Cwd: cwd, Sandbox: &protocol.Sandbox{Filesystem: fs},
						PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
				}).(protocol.OpenResult)
				opening += time.Since(t0)
				if fs != sandbox.Off && (open.Sandbox == nil || !open.Sandbox.Enforced) {
					b.Fatalf("open not sandboxed: %+v", open.Sandbox)
				}
				call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: open.Session, Reason: "bench"}, r) })
			}
			b.StopTimer()
			b.ReportMetric(float64(opening.Microseconds())/1000/float64(b.N), "ms/open")
			m.Shutdown()
			m.Wait()
			sup.Seal()
			_ = sup.Close()
		})
	}
}

// BenchmarkOpenSandboxLayers measures what the layers against root add
// to a session/open (docs/architecture.md, "Kernel sandbox"): 200 opens
// (and closes) of the fault agent per op in cgroup mode, the open's
// latency to its result reported as p50-ms and p99-ms, for the workspace
// sandbox as before them (Landlock and no_new_privs only), then adding
// capabilities none, the seccomp filter, and processes own-tree (every
// layer: the default).
func BenchmarkOpenSandboxLayers(b *testing.B) {
	for _, v := range []struct {
		name     string
		sb       *protocol.Sandbox
		seccomp  bool
		wantProc string
	}{
		{"landlock-only", &protocol.Sandbox{Processes: "all", Capabilities: "keep"}, false, "all"},
		{"+capabilities", &protocol.Sandbox{Processes: "all"}, false, "all"},
		{"+seccomp", &protocol.Sandbox{Processes: "all"}, true, "all"},
		{"+processes", nil, true, "own-tree"},
	} {
		b.Run(v.name, func(b *testing.B) {
			m, sup := benchManager(b, reaper.ModeCgroup)
			caps := sandbox.Probe()
			if !caps.Filesystem() || !caps.PIDNamespace {
				b.Skip("needs Landlock and a PID namespace of its own (root)")
			}
			caps.Seccomp = caps.Seccomp && v.seccomp
			m.sh.Config.Sandbox = admission.SandboxConfig{Default: sandbox.Workspace, Caps: caps, Protected: sandbox.CgroupMounts()}
			cwd := b.TempDir()
			const opens = 200
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lat = lat[:0]
				for j := 0; j < opens; j++ {
					t0 := time.Now()
					open := call(b, func(r func(any, error)) {
						m.Open(context.Background(), protocol.OpenParams{SessionKey: "layers-" + strconv.Itoa(j), Agent: "generic",
							Command: &protocol.Command{Path: faultAgent}, Cwd: cwd, Sandbox: v.sb,
							PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
					}).(protocol.OpenResult)
					lat = append(lat, time.Since(t0))
					if sb := open.Sandbox; sb == nil || !sb.Enforced || sb.Processes != v.wantProc || sb.Seccomp != v.seccomp {
						b.Fatalf("open's sandbox %+v, want processes %s seccomp %v", open.Sandbox, v.wantProc, v.seccomp)
					}
					call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: open.Session, Reason: "bench"}, r) })
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			m.Shutdown()
			m.Wait()
			sup.Seal()
			_ = sup.Close()
		})
	}
}
