package fspath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBeneathAndHolds: beneath is by path component, never by string
// prefix (/a/bc is not beneath /a/b); a dir holds what lies beneath it
// but not itself.
func TestBeneathAndHolds(t *testing.T) {
	for _, c := range []struct {
		p     string
		roots []string
		want  bool
	}{
		{"/a/b", []string{"/a/b"}, true},
		{"/a/b/c", []string{"/x", "/a/b"}, true},
		{"/a/bc", []string{"/a/b"}, false},
		{"/a/b/c", []string{"/a/b/"}, true},
		{"/a", []string{"/a/b"}, false},
	} {
		if got := BeneathAny(c.p, c.roots); got != c.want {
			t.Errorf("BeneathAny(%q, %q) = %v, want %v", c.p, c.roots, got, c.want)
		}
	}
	if HoldsAny("/a/b", []string{"/a/b"}) || !HoldsAny("/a/b", []string{"/x", "/a/b/c"}) || HoldsAny("/a/b", []string{"/a/bc"}) {
		t.Error("HoldsAny: want true only for a path strictly beneath the dir")
	}
}

// TestResolveExisting: the longest existing prefix's links are resolved
// and the rest kept, so a dir made later lands where its parent really is.
func TestResolveExisting(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	realResolved, _ := filepath.EvalSymlinks(real)
	if got, want := ResolveExisting(filepath.Join(link, "not", "yet")), filepath.Join(realResolved, "not", "yet"); got != want {
		t.Errorf("ResolveExisting = %q, want %q", got, want)
	}
	if got := ResolveExisting(link + "/"); got != realResolved {
		t.Errorf("ResolveExisting(link/) = %q, want %q", got, realResolved)
	}
}
