package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// npmDistEnv names the directory of `make npm-pack`'s tarballs; `make test`
// sets it.
const npmDistEnv = "ACPX_NPM_DIST"

// nodeHostSummary is the last line examples/nodehost/host.mjs prints.
type nodeHostSummary struct {
	Binary string   `json:"binary"`
	Asked  []string `json:"asked"`
	Turn   *struct {
		Status string `json:"status"`
	} `json:"turn"`
	Updates int `json:"updates"`
	Status  *struct {
		State         string  `json:"state"`
		LastRequestID *string `json:"lastRequestId"`
	} `json:"status"`
	Proof          *proof  `json:"proof"`
	ShutdownProofs []proof `json:"shutdownProofs"`
	SidecarPid     int     `json:"sidecarPid"`
	ExitCode       *int    `json:"exitCode"`
}

// TestNodeHost_FromPackedTarballsRunsCodex is issue 10's Node Done-when: a
// Node host installed from the packed npm tarballs (client + platform
// packages, vscode-jsonrpc from the registry) into a scratch project runs
// open → prompt with a permission escalation its onPermissionRequest answers
// → status → close (complete proof) → shutdown, against the binary of the
// platform package and the real Codex agent (@agentclientprotocol/codex-acp
// 2.6.0) offline on the loopback model stub; then nothing it started is
// alive.
func TestNodeHost_FromPackedTarballsRunsCodex(t *testing.T) {
	t.Parallel()
	dist := os.Getenv(npmDistEnv)
	if dist == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set (make test runs make npm-pack and sets it)", npmDistEnv)
		}
		t.Skipf("%s is not set: run `make npm-pack` and set it to dist/npm", npmDistEnv)
	}
	tarballs := map[string]string{}
	for _, pkg := range []string{"client", "linux-x64", "linux-arm64", "darwin-arm64", "darwin-x64"} {
		matches, _ := filepath.Glob(filepath.Join(dist, "acpx-sidecar-"+pkg+"-*.tgz"))
		if len(matches) != 1 {
			t.Fatalf("want one tarball of @acpx-sidecar/%s in %s, found %v", pkg, dist, matches)
		}
		tarballs["@acpx-sidecar/"+pkg] = matches[0]
	}

	// The scratch project: the client from its tarball; overrides point the
	// client's optionalDependencies at the platform tarballs (npm skips the
	// one whose os/cpu does not match, as it does from a registry).
	project := t.TempDir()
	manifest := map[string]any{
		"name": "nodehost-scratch", "private": true, "type": "module",
		"dependencies": map[string]string{"@acpx-sidecar/client": "file:" + tarballs["@acpx-sidecar/client"]},
		"overrides": map[string]string{
			"@acpx-sidecar/linux-x64":    "file:" + tarballs["@acpx-sidecar/linux-x64"],
			"@acpx-sidecar/linux-arm64":  "file:" + tarballs["@acpx-sidecar/linux-arm64"],
			"@acpx-sidecar/darwin-arm64": "file:" + tarballs["@acpx-sidecar/darwin-arm64"],
			"@acpx-sidecar/darwin-x64":   "file:" + tarballs["@acpx-sidecar/darwin-x64"],
		},
	}
	writeJSONFile(t, filepath.Join(project, "package.json"), manifest)
	host, err := os.ReadFile(filepath.Join(repoRoot, "examples", "nodehost", "host.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "host.mjs"), host, 0o644); err != nil {
		t.Fatal(err)
	}
	runIn(t, project, nil, nil, 180*time.Second, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error")
	installed := filepath.Join(project, "node_modules", "@acpx-sidecar", "linux-x64", "bin", "acpx-sidecar")
	if _, err := os.Stat(installed); err != nil {
		t.Fatalf("the platform package's binary was not installed: %v", err)
	}
	for _, other := range []string{"linux-arm64", "darwin-arm64", "darwin-x64"} {
		if _, err := os.Stat(filepath.Join(project, "node_modules", "@acpx-sidecar", other)); err == nil {
			t.Errorf("npm installed the %s package on this machine", other)
		}
	}

	// Codex offline: config pointing at the stub, in the key's private
	// HOME the sidecar gives the agent (no env.HOME in the open).
	stub := modelstub.New(t.Logf)
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	work, stateDir := t.TempDir(), t.TempDir()
	l, err := agentenv.Prepare("codex", repoRoot, srv.URL, agentenv.KeyHome(stateDir, "node-host-1"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("codex cannot be prepared (make deps installs it): %v", err)
		}
		t.Skipf("codex not installed (run `make deps`): %v", err)
	}
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	secret := "sk-node-" + randHex(12)
	env := map[string]string{l.KeyEnv: secret, testmark.Env: mark}
	for k, v := range l.Env {
		env[k] = v
	}
	job := map[string]any{"stateDir": stateDir, "sessionKey": "node-host-1", "agent": l.Agent, "command": l.Command,
		"cwd": work, "env": env, "prompt": "make a file\nrun: echo from node > node.txt"}
	jobJSON, _ := json.Marshal(job)

	// The host itself carries the marker, so the sidecar it spawns does too;
	// ACPX_SIDECAR_BINARY is removed so the platform package is what runs.
	var hostEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACPX_SIDECAR_BINARY=") {
			hostEnv = append(hostEnv, kv)
		}
	}
	hostEnv = append(hostEnv, testmark.Env+"="+mark)
	out := runIn(t, project, hostEnv, jobJSON, 150*time.Second, "node", "host.mjs")
	t.Logf("node host output:\n%s", out)
	if strings.Contains(out, secret) {
		t.Errorf("the API key appears in the host's output")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum nodeHostSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("the host's last line is not its JSON summary: %v", err)
	}
	if sum.Binary != installed {
		t.Errorf("the client ran %s, want the platform package's %s", sum.Binary, installed)
	}
	if len(sum.Asked) == 0 || sum.Asked[0] != "execute" {
		t.Errorf("permission requests the host answered: %v, want an execute escalation", sum.Asked)
	}
	if sum.Turn == nil || sum.Turn.Status != "completed" || sum.Updates == 0 {
		t.Errorf("turn %+v with %d updates, want completed with updates", sum.Turn, sum.Updates)
	}
	if b, err := os.ReadFile(filepath.Join(work, "node.txt")); err != nil || strings.TrimSpace(string(b)) != "from node" {
		t.Errorf("the approved command did not run: %v %q (stub commands %v)", err, b, stub.Stats().Commands)
	}
	if sum.Status == nil || sum.Status.State != "open" || sum.Status.LastRequestID == nil || *sum.Status.LastRequestID != "turn-1" {
		t.Errorf("status %+v", sum.Status)
	}
	if sum.Proof == nil || !sum.Proof.Complete || !sum.Proof.Verified.TreeEmpty {
		t.Errorf("close proof %+v, want complete", sum.Proof)
	}
	if len(sum.ShutdownProofs) != 0 || sum.ExitCode == nil || *sum.ExitCode != 0 {
		t.Errorf("shutdown: proofs %+v exit %v, want none and 0", sum.ShutdownProofs, sum.ExitCode)
	}
	if sum.SidecarPid <= 0 || alive(sum.SidecarPid) {
		t.Errorf("sidecar pid %d still alive after the host exited", sum.SidecarPid)
	}
	waitNoMarked(t, mark, "", 5*time.Second)
	grepSecret(t, secret, stateDir, nil)
}

// runIn runs name argv in dir with env (nil: this process's) and stdin,
// bounded by d, and returns its stdout; it fails the test with stdout and
// stderr when the command fails. The child is tracked (trackChild), so
// the orphan reaper leaves it to Wait.
func runIn(t *testing.T, dir string, env []string, stdin []byte, d time.Duration, name string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Start()
	if err == nil {
		// Its Wait is ours: the package's orphan reaper (process_steps_test.go)
		// must leave this child's exit status alone.
		trackChild(cmd.Process.Pid)
		err = cmd.Wait()
	}
	if err != nil {
		t.Fatalf("%s %v in %s: %v\nstdout:\n%s\nstderr:\n%s", name, argv, dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
