package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve_LdflagsThenModuleVersionThenDev(t *testing.T) {
	main := &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}}
	dep := &debug.BuildInfo{Main: debug.Module{Path: "example.com/host", Version: "(devel)"},
		Deps: []*debug.Module{{Path: "go.uber.org/zap", Version: "v1.28.0"}, {Path: ModulePath, Version: "v0.4.0"}}}
	devel := &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}
	for _, c := range []struct {
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{" 0.1.0\n", main, "0.1.0"}, // the -X value wins, trimmed
		{"", main, "1.2.3"},
		{"", dep, "0.4.0"}, // a Go host importing the client
		{"", devel, Dev},
		{"", nil, Dev},
	} {
		if got := resolve(c.set, c.bi); got != c.want {
			t.Errorf("resolve(%q, %+v) = %q, want %q", c.set, c.bi, got, c.want)
		}
	}
}

// TestVersion_SetByLdflags builds a program with the -X flag the Makefile
// passes and checks that Version reports exactly that value.
func TestVersion_SetByLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	src := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + ModulePath + "/internal/buildinfo\"\n)\n\nfunc main() { fmt.Print(buildinfo.Version()) }\n"
	// The program must live inside this module to import an internal
	// package; a directory whose name starts with "_" is outside ./... .
	prog, err := os.MkdirTemp(".", "_ldflags-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prog) })
	if err := os.WriteFile(filepath.Join(prog, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X "+ModulePath+"/internal/buildinfo.version=9.8.7-test", "./"+prog)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || strings.TrimSpace(string(out)) != "9.8.7-test" {
		t.Fatalf("version %q (%v), want 9.8.7-test", out, err)
	}
}
