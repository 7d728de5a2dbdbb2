//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStart_MaskedKeyCannotBeReadWrittenOrReplaced: a tree with every
// layer whose cwd holds a key file (two directories down) and a secret
// directory cannot read, write, truncate, chmod, remove or rename the
// key, nor rename a directory on the way to it, nor list or write the
// secret directory; the rest of its cwd stays writable; outside the tree
// the key is untouched.
func TestStart_MaskedKeyCannotBeReadWrittenOrReplaced(t *testing.T) {
	requireRoot(t)
	work := t.TempDir()
	dir := filepath.Join(work, "a", "b")
	secretDir := filepath.Join(work, "creds")
	for _, d := range []string{dir, secretDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "state.key")
	if err := os.WriteFile(key, []byte("THE-MASTER-KEY-BYTES-0123456789ab"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "credentials"), []byte("aws-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := Policy{Filesystem: Workspace, Network: NetAll, Signals: OwnTree, Processes: OwnTreeProcesses, Capabilities: CapsNone}
	plan, _, err := Build(pol, Paths{Cwd: work, Secrets: []string{key, secretDir}}, BuildOptions{BindReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// Each step prints its name and whether it succeeded.
	steps := []struct{ name, cmd string }{
		{"read", "cat " + key},
		{"write", "echo x > " + key},
		{"append", "echo x >> " + key},
		{"chmod", "chmod 644 " + key},
		{"rm", "rm -f " + key},
		{"mv-key", "mv " + key + " " + filepath.Join(work, "stolen")},
		{"mv-over", "echo evil > " + filepath.Join(work, "evil") + " && mv -f " + filepath.Join(work, "evil") + " " + key},
		{"mv-dir", "mv " + filepath.Join(work, "a") + " " + filepath.Join(work, "a2")},
		{"ls-secret-dir", "ls " + secretDir + " | grep -q credentials"},
		{"read-secret-dir", "cat " + filepath.Join(secretDir, "credentials")},
		{"write-secret-dir", "echo x > " + filepath.Join(secretDir, "planted")},
		{"write-cwd", "echo fine > " + filepath.Join(work, "fine")},
		// The devices a shell needs still open; no other does.
		{"dev-null", "echo x > /dev/null"},
		{"dev-urandom", "head -c 1 /dev/urandom"},
	}
	// A disk's raw blocks would hold the key's bytes (a root tree owns
	// the node, capabilities or not).
	if disk := blockDevice(t); disk != "" {
		steps = append(steps, struct{ name, cmd string }{"read-disk", "head -c 1 " + disk})
	}
	var script strings.Builder
	for _, s := range steps {
		script.WriteString("if " + s.cmd + " >/dev/null 2>&1; then echo " + s.name + "=ok; else echo " + s.name + "=refused; fi\n")
	}
	tr := launch(t, &plan, work, script.String(), false)
	if tr.initErr != nil {
		t.Fatal(tr.initErr)
	}
	out := tr.finish(t)
	for _, s := range steps {
		want := s.name + "=refused"
		if s.name == "write-cwd" || strings.HasPrefix(s.name, "dev-") {
			want = s.name + "=ok"
		}
		if !strings.Contains(out, want+"\n") {
			t.Errorf("%s: want %s in the tree's output:\n%s", s.cmd, want, out)
		}
	}
	if strings.Contains(out, "MASTER-KEY") {
		t.Errorf("the key's bytes reached the tree:\n%s", out)
	}
	if b, err := os.ReadFile(key); err != nil || string(b) != "THE-MASTER-KEY-BYTES-0123456789ab" {
		t.Errorf("the key outside the tree: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(secretDir, "planted")); err == nil {
		t.Errorf("the tree wrote into the secret directory")
	}
}

// blockDevice is a block device node in /dev ("" when there is none).
func blockDevice(t *testing.T) string {
	ents, _ := os.ReadDir("/dev")
	for _, e := range ents {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	t.Log("no block device in /dev: the raw-disk step is skipped")
	return ""
}
