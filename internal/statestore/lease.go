package statestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Lease is this sidecar's ownership of one key (PROTOCOL §10.2
// "Fencing"): the head it last wrote and that write's etag (the S3 ETag;
// for file:// the hex SHA-256 of the head's bytes). Every later head write
// is conditional on that etag. A Lease that met ErrFenced (or was
// discarded) is dead for good. Its methods are safe for concurrent use
// (serialized).
type Lease struct {
	s       *Store
	key     string
	dir     string
	mu      sync.Mutex
	head    Head
	raw     []byte
	etag    string
	dead    error
	pending []byte // a head write whose outcome is still unknown
	// shown is a copy of head for Head, which never waits on a
	// publication in progress (that holds mu across its network calls).
	shown atomic.Pointer[Head]
}

// setHead installs h as the Lease's head (under mu).
func (l *Lease) setHead(h Head) {
	l.head = h
	c := h.clone()
	l.shown.Store(&c)
}

// SessionKey is the key the Lease owns.
func (l *Lease) SessionKey() string { return l.key }

// Head returns (a copy of) the head as this Lease last wrote it; its
// Archive is what Restore fetches.
func (l *Lease) Head() Head {
	if h := l.shown.Load(); h != nil {
		return h.clone()
	}
	return Head{}
}

// Verify reads the key's head and checks it is still the one this Lease
// last wrote (a revive asks before it launches anything, so a key another
// sidecar took over is not run on stale state; docs/protocol.md §24).
// Errors: ErrFenced (the head moved: the Lease is dead), ErrUnavailable
// (the store failed), ErrNotFound-free: a missing head is ErrFenced too
// (the key was discarded by its new owner).
func (l *Lease) Verify(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead != nil {
		return l.dead
	}
	if l.pending != nil {
		return l.resolvePending(ctx)
	}
	_, etag, err := l.s.b.getHead(ctx, l.dir+"/head")
	switch {
	case errors.Is(err, ErrNotFound):
		l.dead = ErrFenced
		return ErrFenced
	case err != nil:
		return unavailable("read head", err)
	case etag != l.etag:
		l.dead = ErrFenced
		return fmt.Errorf("%w (head moved past generation %d)", ErrFenced, l.head.Generation)
	}
	return nil
}

func (s *Store) encodeHead(h Head) []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // plain data always marshals
	}
	return b
}

// Publication is what Publish stored (PROTOCOL §10.2 the proof's
// `publication`): Generation of the new head, Object the archive's name,
// Bytes the object's size, SHA256 its hex SHA-256, Entries the archive's
// entries, FileBytes the total of file contents, Ms the wall time in
// milliseconds, Skipped the entries left out (at most 1000; SkippedTotal
// counts them all).
type Publication struct {
	// Generation is the new head's generation.
	Generation int64
	// Object is the archive's object name in the store.
	Object string
	// Bytes is the archive object's size in bytes.
	Bytes int64
	// SHA256 is the archive object's hex SHA-256.
	SHA256 string
	// Entries is the number of entries in the archive.
	Entries int64
	// FileBytes is the total size of the archived file contents in bytes.
	FileBytes int64
	// Ms is Publish's wall time in milliseconds.
	Ms int64
	// Skipped are the entries left out, at most 1000 of them.
	Skipped []Skip
	// SkippedTotal counts every entry left out, beyond Skipped's bound too.
	SkippedTotal int64
}

// countWriter hashes and counts an object's bytes on their way to the
// store and remembers the store's write error (ErrUnavailable material,
// unlike an error reading a source).
type countWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// resolvePending settles a head write whose outcome was left unknown: the
// head still at the Lease's etag (it did not happen), our bytes (it did:
// the Lease advances), or anything else (fenced).
func (l *Lease) resolvePending(ctx context.Context) error {
	if l.pending == nil {
		return nil
	}
	raw, etag, err := l.s.b.getHead(ctx, l.dir+"/head")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return unavailable("read head", err)
	}
	switch {
	case err == nil && etag == l.etag:
	case err == nil && bytes.Equal(raw, l.pending):
		h, derr := decodeHead(raw, l.dir)
		if derr != nil {
			return derr
		}
		l.setHead(h)
		l.raw, l.etag = raw, etag
	default:
		l.dead = ErrFenced
		return ErrFenced
	}
	l.pending = nil
	return nil
}

// Publish archives sources (PROTOCOL §10.2) into a new object
// "keys/<enc>/archives/<generation>-<16 hex>" sealed for the next head
// generation, verifies it by read-back (S3: every part's SHA-256 checked by
// the server on receipt, then HeadObject's composite SHA-256 and size
// compared with ours; file://: fsync, re-read and hash), and only then
// replaces the head — conditional on the Lease's etag — with {generation+1,
// owner, archive: the new object, previous: the old archive}. The Lease
// then holds the new head. Afterwards archives of the key that are neither
// the new head's archive nor its previous and not newer than its
// generation are deleted (retention, best effort). A Source whose path
// does not exist is recorded as absent.
//
// Errors: ErrFenced (the head was moved by another owner; the Lease is
// dead; the new owner's head was not touched), ErrUnavailable (the store
// failed; the head and local files are untouched; retry later), ErrTooLarge
// (a limit was exceeded; nothing published), ErrInvalid (bad sources), or
// an error reading a source. An unknown outcome of the head write (timeout,
// dropped connection) is resolved by reading the head: our bytes mean
// success; the Lease's etag means ErrUnavailable; anything else ErrFenced;
// unreadable means ErrUnavailable and the next call resolves it first.
func (s *Store) Publish(ctx context.Context, l *Lease, sources []Source) (Publication, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead != nil {
		return Publication{}, l.dead
	}
	start := time.Now()
	if err := l.resolvePending(ctx); err != nil {
		return Publication{}, err
	}
	gen := l.head.Generation + 1
	obj := fmt.Sprintf("%s/archives/%d-%s", l.dir, gen, randomHex(8))
	ref, res, err := s.writeObject(ctx, l.key, obj, gen, sources)
	if err != nil {
		return Publication{}, err
	}
	now := s.now().UTC()
	nh := Head{Schema: Schema, Generation: gen, Owner: s.owner, Archive: &ref, Previous: l.head.Archive, PublishedAt: &now}
	data := s.encodeHead(nh)
	etag, err := s.b.putHead(ctx, l.dir+"/head", data, l.etag)
	if err != nil {
		raw, gotTag, rerr := s.b.getHead(ctx, l.dir+"/head")
		switch {
		case rerr == nil && bytes.Equal(raw, data):
			etag = gotTag // ours: the write happened
		case errors.Is(err, errPrecondition) || (rerr == nil && gotTag != l.etag) || errors.Is(rerr, ErrNotFound):
			l.dead = ErrFenced
			s.b.deleteObject(ctx, obj)
			return Publication{}, fmt.Errorf("%w (head moved past generation %d)", ErrFenced, l.head.Generation)
		case rerr == nil: // still ours from before: the write did not happen
			s.b.deleteObject(ctx, obj)
			return Publication{}, unavailable("write head", err)
		default: // unknown, and unreadable: the next call resolves it
			l.pending = data
			return Publication{}, unavailable("write head", err)
		}
	}
	l.setHead(nh)
	l.raw, l.etag = data, etag
	s.retain(ctx, l.dir, nh)
	return Publication{Generation: gen, Object: obj, Bytes: ref.Bytes, SHA256: ref.SHA256, Entries: ref.Entries,
		FileBytes: res.bytes, Ms: time.Since(start).Milliseconds(), Skipped: res.skipped, SkippedTotal: res.skippedTotal}, nil
}

// encoderOptions: the fastest level, a 1 MiB window and no encoder
// goroutines (concurrency 1: the stream is encoded synchronously).
var encoderOptions = []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
	zstd.WithWindowSize(1 << 20), zstd.WithEncoderCRC(false)}

// writeObject streams tar → zstd → seal → store and commits the object.
func (s *Store) writeObject(ctx context.Context, key, obj string, gen int64, sources []Source) (ArchiveRef, archiveResult, error) {
	ow, err := s.b.newObject(ctx, obj)
	if err != nil {
		return ArchiveRef{}, archiveResult{}, s.storeErr("write archive", err)
	}
	cw := &countWriter{w: ow, h: sha256.New()}
	// three goroutines: archive → compress → seal and store
	sealer, err := startStage(4, func(r io.Reader) error {
		sw, err := seal(cw, s.key, associatedData(key, gen))
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(sw, r, make([]byte, 64<<10)); err != nil {
			return err
		}
		return sw.Close()
	})
	if err != nil {
		ow.abort()
		return ArchiveRef{}, archiveResult{}, err
	}
	// 16 chunks (4 MiB) before the compressor: it is the slowest step on
	// text and the fastest on incompressible data, where archiving (reading
	// and hashing files) is the slowest; the ring evens the two out.
	compressor, err := startStage(16, func(r io.Reader) error {
		zw, err := zstd.NewWriter(sealer, encoderOptions...)
		if err != nil {
			return err
		}
		if _, err := zw.ReadFrom(r); err != nil {
			zw.Close()
			return err
		}
		return zw.Close()
	})
	if err != nil {
		sealer.finish(err)
		ow.abort()
		return ArchiveRef{}, archiveResult{}, err
	}
	res, aerr := writeArchive(ctx, compressor, sources, s.lim, s.scratch)
	zerr := compressor.finish(aerr)
	serr := sealer.finish(firstErr(aerr, zerr))
	// the deepest stage's error is the cause (the others saw it through
	// their pipes)
	err = firstErr(serr, zerr, aerr)
	if err == nil {
		err = ow.commit(cw.h.Sum(nil), cw.n)
		if err != nil {
			err = s.storeErr("write archive", err)
		}
	}
	if err != nil {
		ow.abort()
		if cw.err != nil {
			return ArchiveRef{}, archiveResult{}, s.storeErr("write archive", cw.err)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			err = unavailable("publish", err)
		}
		return ArchiveRef{}, archiveResult{}, err
	}
	return ArchiveRef{Object: obj, SHA256: hex.EncodeToString(cw.h.Sum(nil)), Bytes: cw.n, Entries: res.entries, Generation: gen}, res, nil
}

// retain deletes the key's archives that h no longer references and that
// are not newer than h (PROTOCOL §10.2 "Retention": at publication, never
// by polling). Failures are ignored: the next publication retries.
func (s *Store) retain(ctx context.Context, dir string, h Head) {
	keep := map[string]bool{h.Archive.Object: true}
	if h.Previous != nil {
		keep[h.Previous.Object] = true
	}
	var drop []string
	s.b.list(ctx, dir+"/archives/", func(name string) error {
		base := name[strings.LastIndexByte(name, '/')+1:]
		g, _, ok := strings.Cut(base, "-")
		n, err := strconv.ParseInt(g, 10, 64)
		if ok && err == nil && n <= h.Generation && !keep[name] {
			drop = append(drop, name)
		}
		return nil
	})
	for _, name := range drop {
		s.b.deleteObject(ctx, name)
	}
}

// Discard deletes every object of the lease's key, archives and head
// (PROTOCOL §10.2 `discardPersistentState`): it lists the archives, deletes
// the head conditionally on the Lease's etag, then the archives listed. The
// Lease is then over (later calls: ErrFenced). Errors: ErrFenced (another
// owner holds the key: nothing deleted), ErrUnavailable.
func (s *Store) Discard(ctx context.Context, l *Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead != nil {
		return l.dead
	}
	if err := l.resolvePending(ctx); err != nil {
		return err
	}
	var names []string
	if err := s.b.list(ctx, l.dir+"/archives/", func(n string) error { names = append(names, n); return nil }); err != nil {
		return s.storeErr("list archives", err)
	}
	if err := s.b.deleteHead(ctx, l.dir+"/head", l.etag); err != nil {
		_, gotTag, rerr := s.b.getHead(ctx, l.dir+"/head")
		switch {
		case errors.Is(rerr, ErrNotFound) && !errors.Is(err, errPrecondition):
			// deleted after all
		case errors.Is(err, errPrecondition) || (rerr == nil && gotTag != l.etag):
			l.dead = ErrFenced
			return ErrFenced
		default:
			return unavailable("delete head", err)
		}
	}
	l.dead = fmt.Errorf("%w: the key's state was discarded", ErrFenced)
	for _, n := range names {
		if err := s.b.deleteObject(ctx, n); err != nil {
			return s.storeErr("delete archive", err)
		}
	}
	if fb, ok := s.b.(*fileBackend); ok {
		fb.removeKeyDirs(l.dir)
	}
	return nil
}
