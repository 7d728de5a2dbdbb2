package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A key's private HOME (docs/protocol.md §19): <stateDir>/homes/<HomeName
// (key)>, mode 0700, the only place under a state dir a sandboxed tree may
// write, and only its own key's. It is made beneath the state dir's kept
// handle (held.go), never through a link, kept across the key's sessions
// and removed with RemoveHome (a close with discardPersistentState).

// homesName is the directory of the keys' private HOMEs in a state dir.
const homesName = "homes"

// HomeName is the name of key's private HOME in homes/: EncodeKey(key),
// except for the keys "." and "..", which encodeURIComponent leaves as
// they are and which would name homes/ itself or the state dir: their
// dots are percent-encoded ("%2E", "%2E%2E"; no other key encodes to
// those, since EncodeKey encodes every "%"). Every other key keeps the
// name of its record file, so HOMEs made before this rule stay in place.
func HomeName(key string) string {
	if key == "." || key == ".." {
		return strings.Repeat("%2E", len(key))
	}
	return EncodeKey(key)
}

// HomePath is the key's private HOME (it may not exist).
func (s *Store) HomePath(key string) string {
	return filepath.Join(s.dir, homesName, HomeName(key))
}

// Home makes the key's private HOME if it does not exist and returns its
// path: homes/ (0700) and homes/<enc> (0700) created beneath the state
// dir's handle with mkdirat, each then opened without following a link
// and checked to be a directory owned by this uid and closed to group
// and others. Errors: ErrInvalidKey, an *UnsafeFileError (a link, another
// owner, wider permissions), or the mkdir/open error.
func (s *Store) Home(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	root, err := OpenSafeDir(s.dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	homes, err := root.subdir(homesName)
	if err != nil {
		return "", err
	}
	defer unix.Close(homes)
	enc := HomeName(key)
	home, err := mkdirChecked(homes, enc, filepath.Join(s.dir, homesName, enc))
	if err != nil {
		return "", err
	}
	unix.Close(home)
	return s.HomePath(key), nil
}

// subdir makes (if missing) and opens d/name as a checked directory
// (mkdirChecked).
func (d *SafeDir) subdir(name string) (int, error) {
	if err := d.name(name); err != nil {
		return -1, err
	}
	return mkdirChecked(d.fd, name, filepath.Join(d.path, name))
}

// mkdirChecked makes name (0700) below dirfd unless it exists, then opens
// it O_DIRECTORY | O_NOFOLLOW and checks it: a directory of this uid with
// no group or other bits. p names it in errors.
func mkdirChecked(dirfd int, name, p string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, dirMode); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, &UnsafeFileError{Path: p, Reason: "is not a directory (a link?)"}
		}
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		unix.Close(fd)
		return -1, &UnsafeFileError{Path: p, Reason: fmt.Sprintf("is owned by uid %d, not %d", st.Uid, os.Geteuid())}
	case st.Mode&0o077 != 0:
		if err := unix.Fchmod(fd, dirMode); err != nil { // ours: made by an older umask
			unix.Close(fd)
			return -1, &UnsafeFileError{Path: p, Reason: fmt.Sprintf("has mode %#o, want 0700", st.Mode&0o777)}
		}
	}
	return fd, nil
}

// RemoveHome removes the key's private HOME and everything in it,
// beneath the state dir's handle, never following a link (a link inside
// is removed, not its target). A missing HOME is no error.
func (s *Store) RemoveHome(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	root, err := OpenSafeDir(s.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	homes, err := openBeneath(root.fd, homesName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Join(s.dir, homesName), Err: err}
	}
	defer unix.Close(homes)
	return removeAllAt(homes, HomeName(key), s.HomePath(key), 0)
}

// RemoveEmptyHome removes the key's private HOME if it is an empty
// directory, beneath the state dir's handle (rmdir: never a link, never
// anything in it), and reports whether it did: an open that made the HOME
// and then failed leaves nothing behind (docs/protocol.md §19). A missing
// HOME, or one that holds anything, is left as it is without error.
func (s *Store) RemoveEmptyHome(key string) (bool, error) {
	if err := ValidateKey(key); err != nil {
		return false, err
	}
	root, err := OpenSafeDir(s.dir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	homes, err := openBeneath(root.fd, homesName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "open", Path: filepath.Join(s.dir, homesName), Err: err}
	}
	defer unix.Close(homes)
	err = unix.Unlinkat(homes, HomeName(key), unix.AT_REMOVEDIR)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTDIR):
		return false, nil
	}
	return false, &os.PathError{Op: "remove", Path: s.HomePath(key), Err: err}
}

// removeAllAt removes name below dirfd: a directory's entries first
// (opened O_NOFOLLOW, beneath), then the directory; anything else is
// unlinked. p names it in errors; depth bounds the recursion.
func removeAllAt(dirfd int, name, p string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	if depth > 256 {
		return &os.PathError{Op: "remove", Path: p, Err: unix.ELOOP}
	}
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	d := os.NewFile(uintptr(fd), p)
	for {
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if err := removeAllAt(fd, n, filepath.Join(p, n), depth+1); err != nil {
				d.Close()
				return err
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	d.Close()
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// RemoveInHome removes rel (a local path: no "..", not absolute) inside
// the key's private HOME and everything beneath it, walking from the
// state dir's handle without following a link at any step (a link on
// the way: nothing removed, an error). A missing rel is no error.
func (s *Store) RemoveInHome(key, rel string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if !filepath.IsLocal(rel) || rel == "." {
		return fmt.Errorf("store: %q is not a path inside a home", rel)
	}
	root, err := OpenSafeDir(s.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	parts := append([]string{homesName, HomeName(key)}, strings.Split(filepath.Clean(rel), string(filepath.Separator))...)
	dir, err := unix.FcntlInt(uintptr(root.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	p := s.dir
	for _, name := range parts[:len(parts)-1] {
		p = filepath.Join(p, name)
		next, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		dir = next
	}
	defer unix.Close(dir)
	last := parts[len(parts)-1]
	return removeAllAt(dir, last, filepath.Join(p, last), 0)
}
