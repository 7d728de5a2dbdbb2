package statestore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// placer moves a verified tree out of the fresh directory into the
// targets (PROTOCOL §10.2 "moves it into place byte-exact with modes;
// files the new environment already holds ... are kept and listed").
type placer struct {
	kept      []string
	keptTotal int64
	buf       []byte
}

func (pl *placer) keep(rel string) {
	pl.keptTotal++
	if len(pl.kept) < maxSkipList {
		pl.kept = append(pl.kept, rel)
	}
}

// place moves src (in the fresh directory) to dst. A dst that does not
// exist gets src by rename (its parents made 0700 as needed; across
// filesystems, a copy). A dst directory that exists and src a directory:
// each child is placed in turn, and dst keeps its own mode. Anything else
// that exists at dst (a file, a link, a directory where src has a file) is
// kept and listed as rel.
func (pl *placer) place(src, dst, rel string) error {
	dstSt, err := os.Lstat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		err := os.Rename(src, dst)
		if errors.Is(err, syscall.EXDEV) {
			return pl.copyTree(src, dst)
		}
		if err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	srcSt, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	if !(srcSt.IsDir() && dstSt.IsDir()) {
		pl.keep(rel)
		return nil
	}
	// src is ours (in the fresh directory): make sure its children can be
	// moved out even when its archived mode has no owner write bit.
	if err := os.Chmod(src, 0o700); err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	names, err := readNames(src)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := pl.place(filepath.Join(src, n), filepath.Join(dst, n), rel+"/"+n); err != nil {
			return err
		}
	}
	return nil
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("statestore: restore: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("statestore: restore: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// copyTree copies src to dst (which does not exist) when a rename crosses
// filesystems: directories, regular files and symlinks with their modes
// and mtimes; dst is created exclusively and never followed.
func (pl *placer) copyTree(src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	switch m := st.Mode(); {
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err == nil {
			err = os.Symlink(t, dst)
		}
		if err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
	case m.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		names, err := readNames(src)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := pl.copyTree(filepath.Join(src, n), filepath.Join(dst, n)); err != nil {
				return err
			}
		}
		if err := os.Chmod(dst, m.Perm()); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		if err := os.Chtimes(dst, st.ModTime(), st.ModTime()); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
	default:
		if err := pl.copyFile(src, dst, st); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
	}
	return nil
}

func (pl *placer) copyFile(src, dst string, st fs.FileInfo) error {
	in, err := os.OpenFile(src, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	if pl.buf == nil {
		pl.buf = make([]byte, copyBufSize)
	}
	if _, err := io.CopyBuffer(out, in, pl.buf); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(st.Mode().Perm()); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}
