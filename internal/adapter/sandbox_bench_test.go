package adapter

import (
	"context"
	"strconv"
	"testing"
	"time"

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
			m.cfg.Sandbox = SandboxConfig{Default: sandbox.Off, Caps: sandbox.Probe(), Protected: sandbox.CgroupMounts()}
			if fs != sandbox.Off && !m.cfg.Sandbox.Caps.Filesystem() {
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
