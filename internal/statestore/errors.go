package statestore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"syscall"
)

// The errors of this package, each matched with errors.Is. They map onto
// the protocol's data.codes (PROTOCOL §10.2): ErrFenced STATE_FENCED,
// ErrCorrupt STATE_CORRUPT, ErrTooLarge STATE_TOO_LARGE, ErrUnavailable
// STATE_STORE_UNAVAILABLE (retryable).
var (
	// ErrFenced: a conditional head write failed because another owner
	// moved the head (it took the key over). The Lease is dead: every later
	// Publish or Discard on it returns ErrFenced at once, and nothing of the
	// new owner's was changed.
	ErrFenced = errors.New("statestore: fenced: another sidecar owns the key")
	// ErrUnavailable: the store could not be reached or failed (network,
	// timeout, HTTP 5xx, an S3 error other than a precondition or a missing
	// object, a local I/O error of a file:// store). Retryable: the previous
	// head and the local files are untouched.
	ErrUnavailable = errors.New("statestore: store unavailable")
	// ErrTooLarge: a limit (Limits) was exceeded while streaming. Publish:
	// nothing was published. Restore: nothing was placed.
	ErrTooLarge = errors.New("statestore: over a state limit")
	// ErrCorrupt: an archive failed verification (AEAD, truncation,
	// reordered segments, wrong session key or generation, manifest
	// mismatch, a forbidden path or link) or a head is not a valid head.
	ErrCorrupt = errors.New("statestore: corrupt state")
	// ErrNotFound: ReadHead found no head for the key.
	ErrNotFound = errors.New("statestore: no head for the key")
	// ErrInvalid: a bad argument (session key, source name or path, URL).
	ErrInvalid = errors.New("statestore: invalid argument")
)

// errPrecondition is a backend's answer to a conditional write whose
// condition did not hold (S3 412, file:// etag mismatch); callers turn it
// into ErrFenced or a retry.
var errPrecondition = errors.New("statestore: precondition failed")

// unavailable wraps err (a store's failure) as ErrUnavailable.
func unavailable(op string, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
}

const oNoFollow = syscall.O_NOFOLLOW

// trackReader counts and hashes what passes through and records the first
// read error other than io.EOF, wrapped as ErrUnavailable (a store stream
// that broke is the store's failure, not a corrupt archive).
type trackReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

func newTrackReader(r io.Reader) *trackReader { return &trackReader{r: r, h: sha256.New()} }

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n += int64(n)
	t.h.Write(p[:n])
	if err != nil && err != io.EOF {
		if t.err == nil {
			t.err = unavailable("read object", err)
		}
		return n, t.err
	}
	return n, err
}
