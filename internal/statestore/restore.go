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
// their target and were kept (at most 1000; KeptTotal counts them all).
// The zero Restored means nothing was restored (a head without archive).
type Restored struct {
	Generation int64
	Bytes      int64
	FileBytes  int64
	Entries    int64
	Ms         int64
	Kept       []string
	KeptTotal  int64
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
// removed in every case.
//
// A head without archive restores nothing (zero Restored, nil). Errors:
// ErrCorrupt (the archive is bad — then the head's previous archive is
// tried; both bad: ErrCorrupt), ErrTooLarge (over a limit; nothing
// placed), ErrUnavailable (the store failed), ErrInvalid (bad targets), or
// a local I/O error.
func (s *Store) Restore(ctx context.Context, l *Lease, targets map[string]string, scratchParent string) (Restored, error) {
	for n, p := range targets {
		if err := validSourceName(n); err != nil {
			return Restored{}, err
		}
		if !filepath.IsAbs(p) {
			return Restored{}, fmt.Errorf("%w: target of %q is not absolute", ErrInvalid, n)
		}
	}
	h := l.Head()
	if h.Archive == nil {
		return Restored{}, nil
	}
	start := time.Now()
	r, err := s.restoreRef(ctx, l.key, *h.Archive, targets, scratchParent)
	if errors.Is(err, ErrCorrupt) && h.Previous != nil {
		r, err2 := s.restoreRef(ctx, l.key, *h.Previous, targets, scratchParent)
		if err2 == nil {
			r.Ms = time.Since(start).Milliseconds()
			return r, nil
		}
		if errors.Is(err2, ErrCorrupt) {
			return Restored{}, fmt.Errorf("%w; previous archive: %v", err, err2)
		}
		return Restored{}, err2
	}
	if err != nil {
		return Restored{}, err
	}
	r.Ms = time.Since(start).Milliseconds()
	return r, nil
}

// restoreRef restores one archive object.
func (s *Store) restoreRef(ctx context.Context, key string, ref ArchiveRef, targets map[string]string, scratchParent string) (Restored, error) {
	// The pid in the name lets a sidecar that finds it after this one was
	// killed remove it (store.RemoveStaleTemps): it holds decrypted state.
	fresh, err := os.MkdirTemp(scratchParent, RestoreScratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return Restored{}, fmt.Errorf("statestore: restore: %w", err)
	}
	defer os.RemoveAll(fresh)
	tree := filepath.Join(fresh, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return Restored{}, fmt.Errorf("statestore: restore: %w", err)
	}
	x, tr, err := s.fetchVerified(ctx, key, ref, fresh, tree)
	if err != nil {
		return Restored{}, err
	}
	pl := &placer{}
	names, err := readNames(tree)
	if err != nil {
		return Restored{}, err
	}
	for _, n := range names {
		dst, ok := targets[n]
		if !ok {
			continue
		}
		if err := pl.place(filepath.Join(tree, n), dst, n); err != nil {
			return Restored{}, err
		}
	}
	return Restored{Generation: ref.Generation, Bytes: tr.n, FileBytes: x.bytes, Entries: x.entries,
		Kept: pl.kept, KeptTotal: pl.keptTotal}, nil
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
