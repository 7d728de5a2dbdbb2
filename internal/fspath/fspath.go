// Package fspath holds the path predicates the sandbox's live writable
// roots (internal/registry), the provider-state dirs (internal/provstate)
// and their checks share: a path's longest existing prefix resolved, and
// whether one path lies beneath or holds another. They compare cleaned
// strings; resolve links first (ResolveExisting).
package fspath

import (
	"path/filepath"
	"strings"
)

// ResolveExisting is dir with the symlinks of its longest existing prefix
// resolved: a state dir that does not exist yet is made where its parent
// really is (a link to an agent's cwd included). dir cleaned if no prefix
// resolves.
func ResolveExisting(dir string) string {
	dir = filepath.Clean(dir)
	rest := ""
	for p := dir; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return dir
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// HoldsAny reports whether some path of paths other than dir itself lies
// beneath dir (a writable root inside a state dir opens part of it to the
// agent). Paths are compared as strings: resolve them first.
func HoldsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if p != dir && BeneathAny(p, []string{dir}) {
			return true
		}
	}
	return false
}

// BeneathAny reports whether p is one of roots or lies beneath one.
// Paths are compared as strings: resolve them first.
func BeneathAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
