package admission

import (
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSandboxConfigPolicy_LayersAgainstRootDefaultWithAFilesystemSandbox: processes
// "own-tree" and capabilities "none" are the defaults whenever a
// filesystem sandbox is on, "all" and "keep" otherwise; an open names
// either; a defaulted own-tree this machine cannot give becomes "all"
// with the reason, one the open names stays (Caps.Check then refuses it:
// PLATFORM_UNSUPPORTED).
func TestSandboxConfigPolicy_LayersAgainstRootDefaultWithAFilesystemSandbox(t *testing.T) {
	c := SandboxConfig{Default: sandbox.Workspace, Caps: sandbox.Caps{LandlockABI: 7, Namespaces: true, PIDNamespace: true}}
	pol, why := c.Policy(protocol.OpenParams{})
	if pol.Processes != sandbox.OwnTreeProcesses || pol.Capabilities != sandbox.CapsNone || pol.Signals != sandbox.OwnTree || why != "" {
		t.Errorf("default: %+v %q", pol, why)
	}
	pol, _ = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Filesystem: sandbox.Off}})
	if pol.Processes != sandbox.AllProcesses || pol.Capabilities != sandbox.CapsKeep {
		t.Errorf("filesystem off: %+v", pol)
	}
	pol, _ = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Filesystem: sandbox.Off, Processes: "own-tree", Capabilities: "none"}})
	if pol.Processes != sandbox.OwnTreeProcesses || pol.Capabilities != sandbox.CapsNone {
		t.Errorf("filesystem off with both named: %+v", pol)
	}
	c.Caps = sandbox.Caps{LandlockABI: 7, Namespaces: true, ProcessesReason: "no pidns here"}
	pol, why = c.Policy(protocol.OpenParams{})
	if pol.Processes != sandbox.AllProcesses || !strings.Contains(why, "no pidns here") {
		t.Errorf("default on a machine without a PID namespace: %+v %q", pol, why)
	}
	pol, why = c.Policy(protocol.OpenParams{Sandbox: &protocol.Sandbox{Processes: "own-tree"}})
	if pol.Processes != sandbox.OwnTreeProcesses || why != "" {
		t.Errorf("own-tree named on such a machine: %+v %q, want it kept (and refused by Caps.Check)", pol, why)
	}
}
