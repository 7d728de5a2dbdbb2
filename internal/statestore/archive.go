package statestore

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Source is one named piece of a session key's provider state (PROTOCOL
// §10.2): Name is its logical name ("codex-home", "claude.json", "record",
// "journal"; 1–255 bytes, no "/", no NUL, not "." or "..", not starting
// with ".acpx"), Path the absolute path of a directory or a single file.
// A source's own path may be a symlink (it is resolved once); links inside
// a directory source are archived only by the link rule.
type Source struct {
	// Name is the source's logical name (rules above).
	Name string
	// Path is the absolute path of the source's directory or file.
	Path string
	// Leave are path.Match patterns of paths relative to a directory
	// source's root ("state_*.sqlite*", "cache/*") whose entries are left
	// out of the archive, unlisted: what the agent rebuilds and must not
	// carry to another place (codex's state database names its old
	// CODEX_HOME; docs/agents.md). A bad pattern matches nothing.
	Leave []string
	// Strict refuses a source whose path is a symlink or goes through one
	// (its resolved path is not Path itself): where an agent may write
	// the directory that holds Path, a link planted there must not make
	// the sidecar archive what the link names (issue 29's trial). The
	// publication then fails ErrInvalid.
	Strict bool
}

// Skip is one entry a publication left out (PROTOCOL §10.2: "devices, fifos
// and sockets are skipped and listed"; also links that break the link rule,
// paths over 4096 bytes, files that vanished while archiving): Path is
// "name/relative/path", Reason a short phrase.
type Skip struct {
	// Path is the entry's archive path, "name/relative/path".
	Path string `json:"path"`
	// Reason is a short phrase saying why it was left out.
	Reason string `json:"reason"`
}

const (
	// manifestName is the archive's last entry: one JSON line per entry
	// (manLine), in archive order.
	manifestName = ".acpx-manifest"
	// maxPathLen bounds an archive path ("name/rel"), in bytes.
	maxPathLen = 4096
	// maxSkipList bounds Publication.Skipped and Restored.Kept; the totals
	// are counted beyond it.
	maxSkipList = 1000
	// copyBufSize is the one buffer file contents are copied through.
	copyBufSize = 256 << 10
)

// manLine is one manifest line (PROTOCOL §10.2: "a manifest of every file's
// SHA-256, size and mode"). T: "d" directory, "f" regular file, "l"
// symlink, "absent" a source whose path did not exist. M: permission bits
// (0o777). S and H: a file's size in bytes and hex SHA-256. L: a link's
// target. Both sides derive the line from the tar header and the content's
// hash with writeManLine, so a restore compares lines byte for byte.
type manLine struct {
	T string `json:"t"`
	P string `json:"p"`
	M int64  `json:"m,omitempty"`
	S int64  `json:"s,omitempty"`
	H string `json:"h,omitempty"`
	L string `json:"l,omitempty"`
}

func writeManLine(w io.Writer, l manLine) error {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e.Encode(l)
}

// validSourceName reports whether n can name a source (see Source).
func validSourceName(n string) error {
	switch {
	case n == "" || len(n) > 255:
		return fmt.Errorf("%w: source name of %d bytes", ErrInvalid, len(n))
	case n == "." || n == "..", strings.ContainsAny(n, "/\x00"):
		return fmt.Errorf("%w: source name %q", ErrInvalid, n)
	case strings.HasPrefix(n, ".acpx"):
		return fmt.Errorf("%w: source name %q is reserved", ErrInvalid, n)
	}
	return nil
}

// archiveResult is what writeArchive archived: entries (directories, files
// and links, the sources' roots included), bytes (file contents), the
// skipped entries (at most maxSkipList) and their total.
type archiveResult struct {
	entries, bytes int64
	skipped        []Skip
	skippedTotal   int64
}

type archiver struct {
	ctx  context.Context
	tw   *tar.Writer
	man  *bufio.Writer
	lim  Limits
	res  archiveResult
	buf  []byte
	hash interface {
		io.Writer
		Sum([]byte) []byte
		Reset()
	}
	// leave are the Leave patterns of the directory source being walked.
	leave []string
}

// writeArchive writes the tar of sources (sorted by name) to w, with the
// manifest as its last entry. The manifest is spooled to an unlinked temp
// file in scratchDir while archiving, so memory does not grow with the
// number of entries. Errors: ErrInvalid (bad or duplicate names, relative
// paths), ErrTooLarge (a Limits value exceeded), ctx's error, or the
// read/write error.
func writeArchive(ctx context.Context, w io.Writer, sources []Source, lim Limits, scratchDir string) (archiveResult, error) {
	srcs := append([]Source(nil), sources...)
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].Name < srcs[j].Name })
	for i, s := range srcs {
		if err := validSourceName(s.Name); err != nil {
			return archiveResult{}, err
		}
		if i > 0 && srcs[i-1].Name == s.Name {
			return archiveResult{}, fmt.Errorf("%w: source %q named twice", ErrInvalid, s.Name)
		}
		if !filepath.IsAbs(s.Path) {
			return archiveResult{}, fmt.Errorf("%w: source %q: path is not absolute", ErrInvalid, s.Name)
		}
	}
	mf, err := os.CreateTemp(scratchDir, ".acpx-manifest-*")
	if err != nil {
		return archiveResult{}, fmt.Errorf("statestore: manifest spool: %w", err)
	}
	os.Remove(mf.Name()) // unlinked: nothing is left behind, whatever happens
	defer mf.Close()
	a := &archiver{ctx: ctx, tw: tar.NewWriter(w), man: bufio.NewWriterSize(mf, 64<<10), lim: lim,
		buf: make([]byte, copyBufSize), hash: sha256.New()}
	for _, s := range srcs {
		if err := a.source(s); err != nil {
			return archiveResult{}, err
		}
	}
	if err := a.man.Flush(); err != nil {
		return archiveResult{}, fmt.Errorf("statestore: manifest spool: %w", err)
	}
	size, err := mf.Seek(0, io.SeekCurrent)
	if err != nil {
		return archiveResult{}, fmt.Errorf("statestore: manifest spool: %w", err)
	}
	if _, err := mf.Seek(0, io.SeekStart); err != nil {
		return archiveResult{}, fmt.Errorf("statestore: manifest spool: %w", err)
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: manifestName, Mode: 0o600, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		return archiveResult{}, err
	}
	if n, err := io.CopyBuffer(a.tw, io.LimitReader(mf, size), a.buf); err != nil || n != size {
		return archiveResult{}, fmt.Errorf("statestore: manifest spool: copied %d of %d bytes: %v", n, size, err)
	}
	if err := a.tw.Close(); err != nil {
		return archiveResult{}, err
	}
	return a.res, nil
}

func (a *archiver) skip(p, reason string) {
	a.res.skippedTotal++
	if len(a.res.skipped) < maxSkipList {
		a.res.skipped = append(a.res.skipped, Skip{Path: p, Reason: reason})
	}
}

// count admits one more entry under MaxEntries.
func (a *archiver) count() error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	a.res.entries++
	if a.res.entries > a.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, a.lim.MaxEntries)
	}
	return nil
}

func (a *archiver) source(s Source) error {
	if s.Strict {
		lst, err := os.Lstat(s.Path)
		switch {
		case err == nil && lst.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: source %q is a symlink", ErrInvalid, s.Name)
		case err == nil:
			if r, rerr := filepath.EvalSymlinks(s.Path); rerr != nil || r != filepath.Clean(s.Path) {
				return fmt.Errorf("%w: source %q goes through a symlink", ErrInvalid, s.Name)
			}
		}
	}
	st, err := os.Stat(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return writeManLine(a.man, manLine{T: "absent", P: s.Name})
	}
	if err != nil {
		return fmt.Errorf("statestore: source %q: %w", s.Name, err)
	}
	// the source's own path is resolved once (a HOME/.claude.json or a
	// CODEX_HOME may be a link); nothing below it is followed
	root, err := filepath.EvalSymlinks(s.Path)
	if err != nil {
		return fmt.Errorf("statestore: source %q: %w", s.Name, err)
	}
	switch {
	case st.IsDir():
		if err := a.dirEntry(s.Name, st.Mode(), st.ModTime()); err != nil {
			return err
		}
		a.leave = s.Leave
		defer func() { a.leave = nil }()
		rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("statestore: source %q: %w", s.Name, err)
		}
		defer unix.Close(rfd)
		return a.walk(rfd, root, "", s.Name)
	case st.Mode().IsRegular():
		return a.file(unix.AT_FDCWD, root, s.Name)
	default:
		a.skip(s.Name, "not a directory, regular file or symlink")
		return nil
	}
}

// dirEntry archives a directory at p with its permission bits and
// modification time.
func (a *archiver) dirEntry(p string, mode fs.FileMode, mtime time.Time) error {
	if err := a.count(); err != nil {
		return err
	}
	perm := int64(mode.Perm())
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: perm, ModTime: mtime.Truncate(time.Second)}); err != nil {
		return err
	}
	return writeManLine(a.man, manLine{T: "d", P: p, M: perm})
}

// walk archives the directory dirfd — root/rel, opened without following
// a link — as archive path prefix, children in byte order of their names
// (the order restore checks). Every child is reached from its parent's
// descriptor without following a link (fstatat, openat O_NOFOLLOW), never
// by its path again: an agent that swaps a directory for a link while the
// walk runs (renameat2 RENAME_EXCHANGE in a loop) gets the swap skipped,
// never the link's target archived (adversarial trial: the master key,
// which the agent could not read, reached the store that way).
func (a *archiver) walk(dirfd int, root, rel, prefix string) error {
	lfd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("statestore: read %s: %w", prefix, err)
	}
	d := os.NewFile(uintptr(lfd), prefix)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("statestore: read %s: %w", prefix, err)
	}
	sort.Strings(names)
	for _, n := range names {
		p := prefix + "/" + n
		crel := path.Join(rel, n)
		if len(p) > maxPathLen {
			a.skip(p[:64]+"…", "path longer than 4096 bytes")
			continue
		}
		if a.left(crel) {
			continue
		}
		var st unix.Stat_t
		err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, fs.ErrNotExist) {
			a.skip(p, "vanished while archiving")
			continue
		}
		if err != nil {
			return fmt.Errorf("statestore: %s: %w", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cfd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, fs.ErrNotExist) {
				a.skip(p, "replaced while archiving")
				continue
			}
			if err != nil {
				return fmt.Errorf("statestore: %s: %w", p, err)
			}
			var cst unix.Stat_t
			if err := unix.Fstat(cfd, &cst); err != nil {
				unix.Close(cfd)
				return fmt.Errorf("statestore: %s: %w", p, err)
			}
			if err := a.dirEntry(p, fs.FileMode(cst.Mode&0o777), time.Unix(cst.Mtim.Unix())); err != nil {
				unix.Close(cfd)
				return err
			}
			err = a.walk(cfd, root, crel, p)
			unix.Close(cfd)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := a.file(dirfd, n, p); err != nil {
				return err
			}
		case unix.S_IFLNK:
			if err := a.link(dirfd, n, root, rel, p); err != nil {
				return err
			}
		default:
			a.skip(p, "device, fifo or socket")
		}
	}
	return nil
}

// linkTargetOK is the link rule's syntax, shared by both sides (PROTOCOL
// §10.2): a target that is non-empty, relative, free of NUL, already clean
// (filepath.Clean leaves it unchanged, so ".." can only lead), and that
// resolves lexically from the link's directory dirRel (relative to the
// source root, "" for the root) to the root or inside it. It returns the
// resolved path relative to the root ("" for the root itself) or a reason.
func linkTargetOK(dirRel, target string) (string, string) {
	switch {
	case target == "" || strings.IndexByte(target, 0) >= 0:
		return "", "empty target"
	case path.IsAbs(target):
		return "", "absolute target"
	case path.Clean(target) != target:
		return "", "target not in clean form"
	}
	r := path.Join(dirRel, target)
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", "target outside the source"
	}
	if r == "." {
		r = ""
	}
	return r, ""
}

// link archives the symlink full at archive path p when its target passes
// linkTargetOK and every component of the resolved path exists and is not
// itself a link ("no chains"); else it is skipped and listed.
func (a *archiver) link(dirfd int, name, root, dirRel, p string) error {
	target, err := readlinkAt(dirfd, name)
	if err != nil {
		a.skip(p, "unreadable link")
		return nil
	}
	res, reason := linkTargetOK(dirRel, target)
	if reason == "" && res != "" {
		cur := root
		for _, c := range strings.Split(res, "/") {
			cur = filepath.Join(cur, c)
			st, err := os.Lstat(cur)
			if err != nil {
				reason = "dangling link"
				break
			}
			if st.Mode()&fs.ModeSymlink != 0 {
				reason = "link to a link"
				break
			}
		}
	}
	if reason != "" {
		a.skip(p, reason)
		return nil
	}
	if err := a.count(); err != nil {
		return err
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	return writeManLine(a.man, manLine{T: "l", P: p, L: target})
}

// file archives the regular file name of directory dirfd (AT_FDCWD: name
// is a path) at archive path p, opened without following a link, its
// header sized by the open descriptor and exactly that many bytes copied
// and hashed.
func (a *archiver) file(dirfd int, name, p string) error {
	// a raw open wrapped by os.NewFile: os.OpenFile's poller registration
	// costs syscalls per file that 89,100 files feel
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		a.skip(p, "vanished while archiving")
		return nil
	}
	if errors.Is(err, unix.ELOOP) {
		a.skip(p, "replaced while archiving")
		return nil
	}
	if err != nil {
		return fmt.Errorf("statestore: %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("statestore: %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		a.skip(p, "replaced while archiving")
		return nil
	}
	if err := a.count(); err != nil {
		return err
	}
	size := st.Size()
	if size > a.lim.MaxFileBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d per file", ErrTooLarge, p, size, a.lim.MaxFileBytes)
	}
	if a.res.bytes+size > a.lim.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, a.lim.MaxBytes)
	}
	a.res.bytes += size
	perm := int64(st.Mode().Perm())
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: perm, Size: size, ModTime: st.ModTime().Truncate(time.Second)}); err != nil {
		return err
	}
	a.hash.Reset()
	n, err := io.CopyBuffer(io.MultiWriter(a.tw, a.hash), io.LimitReader(f, size), a.buf)
	if err != nil {
		return fmt.Errorf("statestore: %s: %w", p, err)
	}
	if n != size {
		return fmt.Errorf("statestore: %s shrank from %d to %d bytes while archiving", p, size, n)
	}
	var sum [sha256.Size]byte
	return writeManLine(a.man, manLine{T: "f", P: p, M: perm, S: size, H: hex.EncodeToString(a.hash.Sum(sum[:0]))})
}

// left reports whether rel (relative to the source root) matches one of
// the source's Leave patterns.
func (a *archiver) left(rel string) bool {
	for _, p := range a.leave {
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// readlinkAt is readlinkat(2) of name in directory dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
}
