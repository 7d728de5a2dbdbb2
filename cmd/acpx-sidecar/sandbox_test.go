package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// TestRun_DoctorReportsTheSandbox: `doctor` prints what this machine's
// kernel sandbox enforces (docs/protocol.md §19): the probed Landlock ABI,
// and with --assume-landlock-abi 0 nothing, default off.
func TestRun_DoctorReportsTheSandbox(t *testing.T) {
	type rep struct {
		Sandbox *struct {
			LandlockABI int    `json:"landlockAbi"`
			Filesystem  bool   `json:"filesystem"`
			Signals     bool   `json:"signals"`
			Default     string `json:"default"`
		} `json:"sandbox"`
	}
	doctorOf := func(args ...string) rep {
		var out, errb bytes.Buffer
		run(append([]string{"doctor"}, args...), strings.NewReader(""), &out, &errb)
		var r rep
		if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Sandbox == nil {
			t.Fatalf("doctor %v: no sandbox in %q (%v)", args, out.String(), err)
		}
		return r
	}
	probe := sandbox.Probe()
	r := doctorOf()
	if r.Sandbox.LandlockABI != probe.LandlockABI || r.Sandbox.Filesystem != probe.Filesystem() {
		t.Errorf("doctor sandbox %+v, probe %+v", *r.Sandbox, probe)
	}
	if probe.Filesystem() && probe.Scopes() && r.Sandbox.Default != sandbox.Workspace {
		t.Errorf("default %q on a kernel that enforces workspace", r.Sandbox.Default)
	}
	r = doctorOf("--assume-landlock-abi", "0", "--default-sandbox", "strict")
	if r.Sandbox.LandlockABI != 0 || r.Sandbox.Filesystem || r.Sandbox.Signals || r.Sandbox.Default != sandbox.Off {
		t.Errorf("without Landlock: %+v, want nothing enforced and default off", *r.Sandbox)
	}
}

// TestRun_BadSandboxFlagsExitTwo: a --default-sandbox that is not a mode,
// or an --assume-landlock-abi below -1, is a bad flag.
func TestRun_BadSandboxFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"--default-sandbox=jail"}, {"--assume-landlock-abi=-2"}} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out.String())
		}
	}
}
