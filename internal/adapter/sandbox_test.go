package adapter

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestSandbox_ModeWithoutLaunchEntryRefusesExplicitReportsDefault: in a
// containment mode that cannot carry a sandbox (the fakes', like a
// process-table mode: reaper.SandboxSupported), an explicit sandbox is
// PLATFORM_UNSUPPORTED with nothing launched, and the default sandbox is
// reported not enforced (with a reason) while the open succeeds; a
// default of off is neither.
func TestSandbox_ModeWithoutLaunchEntryRefusesExplicitReportsDefault(t *testing.T) {
	defer goleak.VerifyNone(t)
	if reaper.SandboxSupported(fakeMode) {
		t.Fatalf("the fake mode claims sandbox support")
	}
	l := &fakeLauncher{agent: newFakeAgent()}
	m := fakeManager(t, l, newRecHost())
	m.sh.Config.Sandbox = admission.SandboxConfig{Default: sandbox.Workspace, Caps: sandbox.Caps{LandlockABI: 7, Namespaces: true}}

	p := fakeOpen(t, "explicit")
	p.Sandbox = &protocol.Sandbox{Filesystem: sandbox.Strict}
	o := wait(t, start(func(r session.Reply) { m.Open(context.Background(), p, r) }))
	var pe *protocol.Error
	if !errors.As(o.err, &pe) || pe.Data.Code != protocol.ErrPlatformUnsupported {
		t.Fatalf("explicit sandbox: %v, want PLATFORM_UNSUPPORTED", o.err)
	}
	if l.started() != 0 {
		t.Fatalf("a refused open launched %d trees", l.started())
	}

	o = wait(t, start(func(r session.Reply) { m.Open(context.Background(), fakeOpen(t, "default"), r) }))
	if o.err != nil {
		t.Fatalf("default sandbox: %v, want the open to run", o.err)
	}
	res := o.v.(protocol.OpenResult)
	if sb := res.Sandbox; sb == nil || sb.Enforced || sb.Reason == "" || sb.Filesystem != sandbox.Workspace {
		t.Fatalf("default sandbox result %+v, want workspace not enforced with a reason", sb)
	}
	if caps := m.Initialize(protocol.InitializeParams{}).Capabilities.Sandbox; caps == nil || caps.Default != sandbox.Off {
		t.Errorf("capabilities.sandbox %+v, want default off in this mode", caps)
	}
	m.Shutdown()
	m.Wait()
}
