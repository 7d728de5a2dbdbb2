package statestore

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// node is one entry of a test tree: kind 'd', 'f', 'l' (link), 'p' (fifo).
type node struct {
	kind byte
	mode fs.FileMode
	data string // file content, or link target
}

// makeTree creates the entries under root (parents before children: the
// map is applied in sorted order of paths).
func makeTree(t testing.TB, root string, entries map[string]node) {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := sortedKeys(entries)
	for _, p := range paths {
		n := entries[p]
		full := filepath.Join(root, p)
		var err error
		switch n.kind {
		case 'd':
			err = os.Mkdir(full, 0o700)
		case 'f':
			err = os.WriteFile(full, []byte(n.data), 0o600)
			if err == nil {
				err = os.Chmod(full, n.mode)
			}
		case 'l':
			err = os.Symlink(n.data, full)
		case 'p':
			err = syscall.Mkfifo(full, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// directory modes last, deepest first, so a 0500 directory does not
	// stop its children from being made
	for i := len(paths) - 1; i >= 0; i-- {
		if n := entries[paths[i]]; n.kind == 'd' {
			if err := os.Chmod(filepath.Join(root, paths[i]), n.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

// entryState is what snapshot records of one entry.
type entryState struct {
	Kind string
	Mode fs.FileMode
	Size int64
	Hash string
	Link string
}

// snapshot records every entry under root (root itself as "."): kind,
// permission bits, size and SHA-256 of files, link targets.
func snapshot(t testing.TB, root string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entryState{Mode: st.Mode().Perm()}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			e.Kind, e.Mode = "link", 0
			e.Link, _ = os.Readlink(p)
		case st.IsDir():
			e.Kind = "dir"
		case st.Mode().IsRegular():
			e.Kind = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			e.Size, e.Hash = int64(len(b)), hex.EncodeToString(s[:])
		default:
			e.Kind = "other"
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t testing.TB, want, got string) {
	t.Helper()
	if d := cmp.Diff(snapshot(t, want), snapshot(t, got)); d != "" {
		t.Fatalf("restored tree differs from the published one (-published +restored):\n%s", d)
	}
}

// listDir returns the names in dir (nil if it does not exist).
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// sampleTree is the round-trip tree: nested directories, modes 0600, 0644,
// 0755 and 0700, an empty file, an empty directory, a relative link inside
// (to a file and to a directory), a 0500 directory with a file.
var sampleTree = map[string]node{
	"a":                {kind: 'd', mode: 0o755},
	"a/b":              {kind: 'd', mode: 0o700},
	"a/b/secret.json":  {kind: 'f', mode: 0o600, data: `{"token":"x"}`},
	"a/b/run.sh":       {kind: 'f', mode: 0o755, data: "#!/bin/sh\necho hi\n"},
	"a/empty":          {kind: 'f', mode: 0o644},
	"a/emptydir":       {kind: 'd', mode: 0o755},
	"a/link-to-secret": {kind: 'l', data: "b/secret.json"},
	"a/link-up":        {kind: 'l', data: "../top.txt"},
	"a/link-dir":       {kind: 'l', data: "b"},
	"ro":               {kind: 'd', mode: 0o500},
	"ro/f":             {kind: 'f', mode: 0o444, data: "read only"},
	"top.txt":          {kind: 'f', mode: 0o644, data: "top\n"},
	"sessions":         {kind: 'd', mode: 0o700},
	"sessions/x.jsonl": {kind: 'f', mode: 0o600, data: "{\"a\":1}\n{\"b\":2}\n"},
	"a.b":              {kind: 'f', mode: 0o600, data: "sorts after a/ but before a0"},
	"a0":               {kind: 'f', mode: 0o600, data: "a0"},
}
