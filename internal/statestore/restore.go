package statestore

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Restored is what Restore placed (PROTOCOL §10.2 the open result's
// `restore: {generation, bytes, entries, ms, kept}`): Generation of the
// archive restored, Bytes the object's size, FileBytes the total of file
// contents, Entries the archive's entries, Ms the wall time in
// milliseconds, Kept the "name/relative/path"s that already existed at
// their target and were kept (at most 1000; KeptTotal counts them all),
// FellBack set when the head's newest archive failed verification and its
// previous one was restored instead. The zero Restored means nothing was
// restored (a head without archive).
type Restored struct {
	// Generation is the generation of the archive restored (the
	// previous archive's when FellBack is set).
	Generation int64
	// Bytes is the archive object's size in bytes.
	Bytes int64
	// FileBytes is the total size of the file contents in bytes.
	FileBytes int64
	// Entries is the number of entries in the archive.
	Entries int64
	// Ms is the restore's wall time in milliseconds.
	Ms int64
	// Kept are the "name/relative/path"s that already existed at their
	// target and were kept, at most 1000 of them.
	Kept []string
	// KeptTotal counts every path kept, beyond Kept's bound too.
	KeptTotal int64
	// FellBack is set when the head's newest archive failed verification
	// and its previous one was restored instead; nil otherwise.
	FellBack *FellBack
}

// FellBack says a restore passed over the head's newest archive
// (PROTOCOL §10.2: a bad archive is STATE_CORRUPT and the previous one is
// tried next): Generation is the newest archive's, Reason why it failed
// verification (names objects, never a secret). What that publication
// held is not restored.
type FellBack struct {
	// Generation is the generation of the newest archive, the one passed
	// over.
	Generation int64
	// Reason is its verification error's text.
	Reason string
}

// maxTrailing bounds what may follow the tar's end inside an archive.
const maxTrailing = 1 << 20

// decoderOptions: synchronous decoding, low memory, and a window bound
// (the encoder uses 1 MiB; a frame asking for more than 8 MiB is refused).
var decoderOptions = []zstd.DOption{zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
	zstd.WithDecoderMaxWindow(8 << 20), zstd.WithDecoderMaxMemory(64 << 20)}

// Restore fetches the archive of the Lease's head and puts its sources in
// place (PROTOCOL §10.2 "Restore"). targets maps a source name to the
// absolute path it takes in this environment; a source of the archive
// without a target is verified but not placed. The archive is opened with
// the master key, then Options.OldKey; decompressed and extracted into a
// fresh private directory (0700) made under scratchParent — on the
// targets' filesystem, so the moves are renames — checking every file's
// SHA-256 against the manifest, the link and path rules and the Limits
// while streaming; nothing outside that directory is written until the
// whole object verified (its size and SHA-256 equal the head's). Then each
// source moves to its target: a missing target (parents made 0700) takes
// the restored tree as is, byte-exact with modes; an existing directory
// receives what it lacks; an existing file (or link) is kept and listed in
// Kept. Across filesystems the move is a copy. The fresh directory is
// removed in every case. An open that takes a key over restores with
// AcquireRestore instead, which verifies before it moves the head.
//
// A head without archive restores nothing (zero Restored, nil). Errors:
// ErrCorrupt (the archive is bad — then the head's previous archive is
// tried, and Restored.FellBack says so; both bad: ErrCorrupt), ErrTooLarge
// (over a limit; nothing placed), ErrUnavailable (the store failed),
// ErrInvalid (bad targets), or a local I/O error.
func (s *Store) Restore(ctx context.Context, l *Lease, targets map[string]string, scratchParent string) (Restored, error) {
	if err := checkTargets(targets); err != nil {
		return Restored{}, err
	}
	h := l.Head()
	if h.Archive == nil {
		return Restored{}, nil
	}
	start := time.Now()
	st, err := s.stage(ctx, l.key, h, scratchParent)
	if err != nil {
		return Restored{}, err
	}
	defer st.drop()
	r, err := st.place(targets)
	if err != nil {
		return Restored{}, err
	}
	r.Ms = time.Since(start).Milliseconds()
	return r, nil
}

// checkTargets refuses a target map with a bad source name or a relative
// path (ErrInvalid).
func checkTargets(targets map[string]string) error {
	for n, p := range targets {
		if err := validSourceName(n); err != nil {
			return err
		}
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%w: target of %q is not absolute", ErrInvalid, n)
		}
	}
	return nil
}

// staged is an archive fetched, decrypted and verified into a fresh
// private directory, not yet placed: what a head names, checked before
// anything depends on it (AcquireRestore moves the head only then).
type staged struct {
	fresh    string // the scratch directory (decrypted state): drop removes it
	tree     string
	ref      ArchiveRef // the archive verified
	size     int64      // its object's bytes
	x        *extractor
	fellBack *FellBack
	// for: the head's archive and previous this was staged from (covers)
	forArchive  ArchiveRef
	forPrevious *ArchiveRef
}

// stage verifies the archive h names (h.Archive non-nil), or — when that
// one is corrupt — the one before it (FellBack then says so). Errors as
// Restore's; nothing is left on disk after one.
func (s *Store) stage(ctx context.Context, key string, h Head, scratchParent string) (*staged, error) {
	st, err := s.stageRef(ctx, key, *h.Archive, scratchParent)
	if errors.Is(err, ErrCorrupt) && h.Previous != nil {
		prev, err2 := s.stageRef(ctx, key, *h.Previous, scratchParent)
		switch {
		case err2 == nil:
			prev.fellBack = &FellBack{Generation: h.Archive.Generation, Reason: err.Error()}
			st, err = prev, nil
		case errors.Is(err2, ErrCorrupt):
			err = fmt.Errorf("%w; previous archive: %v", err, err2)
		default:
			err = err2
		}
	}
	if err != nil {
		return nil, err
	}
	st.forArchive = *h.Archive
	if h.Previous != nil {
		p := *h.Previous
		st.forPrevious = &p
	}
	return st, nil
}

// covers reports whether st was staged from a head naming the same
// archive and previous as h (so it is what a restore of h would verify).
// A nil st covers nothing.
func (st *staged) covers(h Head) bool {
	if st == nil || h.Archive == nil || *h.Archive != st.forArchive {
		return false
	}
	if h.Previous == nil || st.forPrevious == nil {
		return h.Previous == nil && st.forPrevious == nil
	}
	return *h.Previous == *st.forPrevious
}

// drop removes st's scratch directory; safe on a nil st and twice.
func (st *staged) drop() {
	if st != nil && st.fresh != "" {
		_ = os.RemoveAll(st.fresh)
		st.fresh = ""
	}
}

// stageRef fetches and verifies one archive object into a fresh
// directory under scratchParent (removed again on failure).
func (s *Store) stageRef(ctx context.Context, key string, ref ArchiveRef, scratchParent string) (*staged, error) {
	// The pid in the name lets a sidecar that finds it after this one was
	// killed remove it (store.RemoveStaleTemps): it holds decrypted state.
	fresh, err := os.MkdirTemp(scratchParent, RestoreScratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("statestore: restore: %w", err)
	}
	st := &staged{fresh: fresh, tree: filepath.Join(fresh, "tree"), ref: ref}
	if err := os.Mkdir(st.tree, 0o700); err != nil {
		st.drop()
		return nil, fmt.Errorf("statestore: restore: %w", err)
	}
	x, tr, err := s.fetchVerified(ctx, key, ref, fresh, st.tree)
	if err != nil {
		st.drop()
		return nil, err
	}
	st.x, st.size = x, tr.n
	return st, nil
}

// place moves st's verified sources to their targets (Restore's rules)
// and says what it restored (Ms left to the caller).
func (st *staged) place(targets map[string]string) (Restored, error) {
	pl := &placer{}
	names, err := readNames(st.tree)
	if err != nil {
		return Restored{}, err
	}
	for _, n := range names {
		dst, ok := targets[n]
		if !ok {
			continue
		}
		if err := pl.place(filepath.Join(st.tree, n), dst, n); err != nil {
			return Restored{}, err
		}
	}
	return Restored{Generation: st.ref.Generation, Bytes: st.size, FileBytes: st.x.bytes, Entries: st.x.entries,
		Kept: pl.kept, KeptTotal: pl.keptTotal, FellBack: st.fellBack}, nil
}

// fetchVerified streams the object through unseal, zstd and the extractor
// into tree, then reads everything that follows the tar to its end (the
// AEAD's final segment) and compares the object's size and SHA-256 with
// ref. A store failure anywhere wins over a corruption it caused.
func (s *Store) fetchVerified(ctx context.Context, key string, ref ArchiveRef, fresh, tree string) (*extractor, *trackReader, error) {
	body, err := s.b.getObject(ctx, ref.Object)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, corruptf("archive %s is missing from the store", ref.Object)
	}
	if err != nil {
		return nil, nil, s.storeErr("read archive", err)
	}
	defer body.Close()
	// tink reads a 4 KiB segment at a time: read the store in larger pieces
	tr := newTrackReader(bufio.NewReaderSize(body, 256<<10))
	spool, err := os.CreateTemp(fresh, ".manifest-*")
	if err != nil {
		return nil, nil, fmt.Errorf("statestore: restore: %w", err)
	}
	os.Remove(spool.Name())
	defer spool.Close()
	x := &extractor{ctx: ctx, root: tree, lim: s.lim, spool: spool}
	// two goroutines: read, hash and decrypt the object (this one) |
	// decompress and extract (the stage), through a 4 MiB ring
	ext, err := startStage(16, func(r io.Reader) error {
		zr, err := zstd.NewReader(r, decoderOptions...)
		if err != nil {
			return err
		}
		defer zr.Close()
		if err := x.extract(zr); err != nil {
			return err
		}
		if n, err := io.Copy(io.Discard, io.LimitReader(zr, maxTrailing)); err != nil {
			return tarErr(err)
		} else if n >= maxTrailing {
			return corruptf("data after the archive's end")
		}
		if n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailing)); err != nil {
			return tarErr(err)
		} else if n > 0 {
			return corruptf("data after the compressed stream")
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	derr := func() error {
		dr, err := unseal(tr, s.keys, associatedData(key, ref.Generation))
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(ext, dr, make([]byte, 64<<10)); err != nil {
			return err
		}
		// the AEAD reached the object's end; anything after it counts in
		// tr's size and hash
		_, err = io.Copy(io.Discard, tr)
		return err
	}()
	eerr := ext.finish(derr)
	if derr == errStageDone {
		derr = corruptf("data after the archive's end")
	}
	// the extractor's own error first: a decrypt error it read through the
	// ring is the same error
	err = firstErr(eerr, derr)
	if tr.err != nil {
		return nil, nil, tr.err
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, unavailable("restore", err)
		}
		return nil, nil, err
	}
	if tr.n != ref.Bytes || hex.EncodeToString(tr.h.Sum(nil)) != ref.SHA256 {
		return nil, nil, corruptf("archive %s is %d bytes with another SHA-256 than its head names", ref.Object, tr.n)
	}
	return x, tr, nil
}

// CheckKeys tells, before a key is taken over, whether this store's master
// keys can open what the key's head names (the newest archive, else the
// one before it): an open must not fence the key's rightful owner when it
// could never restore the key (a sidecar given the wrong --state-key-file;
// issue 29's trial). It reads the head and only each object's header. nil
// when there is nothing to open, when a key opens one of them, or when the
// objects cannot be read now (the restore then reports that); ErrCorrupt
// when no key opens either; ErrUnavailable when the head cannot be read.
func (s *Store) CheckKeys(ctx context.Context, sessionKey string) error {
	kd, err := keyDir(sessionKey)
	if err != nil {
		return err
	}
	raw, _, err := s.b.getHead(ctx, kd+"/head")
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return s.storeErr("read head", err)
	}
	h, err := decodeHead(raw, kd)
	if err != nil {
		return err
	}
	refused := 0
	for _, ref := range []*ArchiveRef{h.Archive, h.Previous} {
		if ref == nil {
			continue
		}
		body, err := s.b.getObject(ctx, ref.Object)
		if err != nil {
			return nil // the restore reports what cannot be read
		}
		_, err = unseal(newTrackReader(body), s.keys, associatedData(sessionKey, ref.Generation))
		body.Close()
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return nil
		}
		refused++
	}
	if refused > 0 {
		return fmt.Errorf("%w: no master key of this sidecar opens the key's published archives", ErrCorrupt)
	}
	return nil
}

// RestoreScratchPrefix starts the name of a restore's scratch directory in
// the state dir: the prefix, the restoring process's pid, "-" and a random
// suffix. A restore removes it in every case; one left by a killed sidecar
// (decrypted provider state) is removed by the next sweep of that state
// dir once its pid is gone (store.RemoveStaleTemps).
const RestoreScratchPrefix = ".acpx-restore-"
