package proctable

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// procargs2 builds a KERN_PROCARGS2 buffer the way the Darwin kernel lays
// it out: argc, the executable path, NUL padding, argv, envp, apple strings.
func procargs2(path string, pad int, argv, env, apple []string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(argv)))
	b = append(append(b, path...), make([]byte, 1+pad)...)
	for _, s := range append(argv, env...) {
		b = append(append(b, s...), 0)
	}
	b = append(b, 0) // an empty string between envp and the apple strings
	for _, s := range apple {
		b = append(append(b, s...), 0)
	}
	return b
}

func TestParseProcArgs2_ReturnsEntriesAfterArgv(t *testing.T) {
	// An argument that looks like the marker must not count: only the
	// strings after argc arguments are the environment.
	buf := procargs2("/usr/bin/env", 3, []string{"env", "ACPX_SIDECAR_SESSION=s-arg", "sleep"},
		[]string{"PATH=/usr/bin", "ACPX_SIDECAR_SESSION=s-1"}, []string{"executable_path=/usr/bin/env", "ptr_munge="})
	got, err := parseProcArgs2(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/bin", "ACPX_SIDECAR_SESSION=s-1", "executable_path=/usr/bin/env", "ptr_munge="}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	if HasEntry(got, "ACPX_SIDECAR_SESSION=s-arg") || !HasEntry(got, "ACPX_SIDECAR_SESSION=s-1") {
		t.Fatalf("HasEntry matched an argument or missed the entry: %q", got)
	}
}

func TestParseProcArgs2_NoEnvironment(t *testing.T) {
	got, err := parseProcArgs2(procargs2("/bin/sh", 0, []string{"sh"}, nil, nil))
	if err != nil || len(got) != 0 {
		t.Fatalf("entries %q, err %v; want none", got, err)
	}
}

func TestParseProcArgs2_RefusesTruncatedBuffers(t *testing.T) {
	full := procargs2("/bin/sleep", 1, []string{"sleep", "300"}, []string{"A=1"}, nil)
	for name, b := range map[string][]byte{
		"empty":         nil,
		"argc only":     full[:4],
		"path unended":  full[:8],
		"inside argv":   full[:len("/bin/sleep")+4+2+len("sleep")+3],
		"argc too high": append(binary.LittleEndian.AppendUint32(nil, 9), full[4:]...),
	} {
		if _, err := parseProcArgs2(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHasEntry_ExactOnly(t *testing.T) {
	env := []string{"M=x", "N=y=z"}
	for entry, want := range map[string]bool{"M=x": true, "N=y=z": true, "M=": false, "M=xy": false, "M": false, "=x": false} {
		if HasEntry(env, entry) != want {
			t.Errorf("HasEntry(%q) = %v", entry, !want)
		}
	}
	if errors.Is(ErrNotFound, ErrUnsupported) {
		t.Fatal("distinct errors")
	}
}
