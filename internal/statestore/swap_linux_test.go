//go:build linux

package statestore

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestArchive_DirectorySwappedForALinkIsNeverFollowed: while a source is
// archived again and again, an agent swaps one of its directories with a
// link to a directory outside it (renameat2 RENAME_EXCHANGE in a loop, as
// fast as it can): no archive ever holds the outside directory's file —
// each run sees the real directory or skips the swapped name (an
// adversarial trial got the master key, outside the agent's reach,
// archived this way when the walk re-opened children by path).
func TestArchive_DirectorySwappedForALinkIsNeverFollowed(t *testing.T) {
	ctx := ctxT(t)
	src, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "master.key"), []byte("SECRET-OUTSIDE"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(src, "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := os.WriteFile(filepath.Join(d, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))), []byte("inside"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(src, "dl")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, filepath.Join(src, "dl"), unix.RENAME_EXCHANGE)
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	for run := 0; run < 300; run++ {
		var buf bytes.Buffer
		if _, err := writeArchive(ctx, &buf, []Source{{Name: "home", Path: src}}, DefaultLimits(), t.TempDir()); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			b, _ := io.ReadAll(tr)
			if strings.HasSuffix(h.Name, "master.key") || bytes.Contains(b, []byte("SECRET-OUTSIDE")) {
				t.Fatalf("run %d: the archive holds %s from outside the source", run, h.Name)
			}
		}
	}
}
