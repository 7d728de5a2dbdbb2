//go:build linux

package launchexec

import (
	"os"
	"os/exec"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// BenchmarkLaunch measures what the launch entry adds to starting a
// program (docs/architecture.md, "Kernel sandbox"): /bin/true run
// directly, through the entry with no plan, and through the entry with
// a workspace and a strict plan (the ruleset built and enforced). ns/op
// is fork to reaped exit; the difference to "direct" is the entry's Go
// start, ruleset and second execve.
func BenchmarkLaunch(b *testing.B) {
	work := b.TempDir()
	plans := map[string]string{"entry": ""}
	for _, fs := range []string{sandbox.Workspace, sandbox.Strict} {
		pol := sandbox.Policy{Filesystem: fs, Network: sandbox.NetAll, Signals: sandbox.OwnTree}
		plan, _, err := sandbox.Build(pol, sandbox.Paths{Cwd: work}, sandbox.BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		plans[fs] = "sandbox=" + mustJSON(b, plan)
	}
	for _, name := range []string{"direct", "entry", sandbox.Workspace, sandbox.Strict} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var cmd *exec.Cmd
				if name == "direct" {
					cmd = exec.Command("/bin/true")
				} else {
					r, w, err := os.Pipe()
					if err != nil {
						b.Fatal(err)
					}
					args := []string{Arg, "status=3"}
					if plans[name] != "" {
						args = append(args, plans[name])
					}
					cmd = exec.Command(os.Args[0], append(args, "--", "/bin/true", "true")...)
					cmd.ExtraFiles = []*os.File{w}
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					w.Close()
					r.Close()
					if err := cmd.Wait(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
