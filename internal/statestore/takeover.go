package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Taking a key over (PROTOCOL §10.2 "Fencing", "Restore"). Acquire moves
// the head to this store at once. AcquireRestore, an open's way, first
// fetches, decrypts and verifies the archive the head names, and moves the
// head only when that archive proved good — conditionally on the very head
// it verified, so the archive it then places is the one the head it
// replaced named: a bad archive (or anything else that refuses the open
// first) never fences the key's live owner (docs/protocol.md §24; a user
// trial found a STATE_CORRUPT open had taken the key over).

// acquireAttempts bounds a takeover's re-reads when the head moves
// between its read and its conditional write.
const acquireAttempts = 5

// testHookAcquireRead, when set by tests, runs in a takeover between the
// head's read and its conditional write.
var testHookAcquireRead func()

// Acquire takes ownership of sessionKey: it reads the head and writes it
// back with generation+1 and Owner = this store's Options.Owner, on the
// condition that it is still the one read (If-Match its etag), or creates
// it with generation 1 and no archive (If-None-Match: *) when there is
// none. When the condition fails (another sidecar moved the head between
// the read and the write) it re-reads and tries again, up to 5 times; an
// unknown outcome of the write is resolved by reading the head. Errors:
// ErrInvalid (bad key), ErrCorrupt (the stored head is not a head),
// ErrUnavailable (store failure, or the head kept moving).
func (s *Store) Acquire(ctx context.Context, sessionKey string) (*Lease, error) {
	return s.takeOver(ctx, sessionKey, nil)
}

// AcquireRestore takes ownership of sessionKey as Acquire does, restoring
// the head's archive when need says the local copy wants it — and
// verifying that archive before it writes the head. After each read of
// the head h that names an archive, need(h) decides; if it says yes, the
// archive (or, when that one is corrupt, the previous one: Restored.
// FellBack) is fetched, decrypted and verified into a fresh directory
// under scratchParent, as Restore does. Only then is the head written,
// conditionally on h; if another sidecar moved it meanwhile the head is
// read again and what it names verified again (unless it names the same
// archives). Once the head is this store's, the verified sources are
// placed at targets (Restore's rules) and the fresh directory removed.
//
// Errors: those of Acquire, and those of Restore's verification
// (ErrCorrupt, ErrTooLarge, ErrUnavailable, ErrInvalid) with the head
// untouched and nothing placed; a local I/O error placing the verified
// sources comes after the head was written (the key is then this store's,
// and the Lease is not returned).
func (s *Store) AcquireRestore(ctx context.Context, sessionKey string, need func(Head) bool, targets map[string]string,
	scratchParent string) (*Lease, Restored, error) {
	if err := checkTargets(targets); err != nil {
		return nil, Restored{}, err
	}
	start := time.Now()
	var st *staged
	defer func() { st.drop() }()
	l, err := s.takeOver(ctx, sessionKey, func(h Head) error {
		if h.Archive == nil || need == nil || !need(h) {
			st.drop()
			st = nil
			return nil
		}
		if st.covers(h) {
			return nil
		}
		st.drop()
		var err error
		st, err = s.stage(ctx, sessionKey, h, scratchParent)
		return err
	})
	if err != nil {
		return nil, Restored{}, err
	}
	if st == nil {
		return l, Restored{}, nil
	}
	r, err := st.place(targets)
	if err != nil {
		return nil, Restored{}, err
	}
	r.Ms = time.Since(start).Milliseconds()
	return l, r, nil
}

// takeOver is Acquire with a check: before, when not nil, runs after every
// read of the head (with the head read; the zero Head when there is none)
// and before the conditional write; its error ends the takeover with the
// head as it was.
func (s *Store) takeOver(ctx context.Context, sessionKey string, before func(Head) error) (*Lease, error) {
	kd, err := keyDir(sessionKey)
	if err != nil {
		return nil, err
	}
	name := kd + "/head"
	for range acquireAttempts {
		raw, etag, err := s.b.getHead(ctx, name)
		if h := testHookAcquireRead; h != nil {
			h()
		}
		var read, h Head
		switch {
		case errors.Is(err, ErrNotFound):
			h, etag = Head{Schema: Schema, Generation: 1, Owner: s.owner}, ""
		case err != nil:
			return nil, s.storeErr("read head", err)
		default:
			if read, err = decodeHead(raw, kd); err != nil {
				return nil, err
			}
			h = read.clone()
			h.Generation++
			h.Owner = s.owner
		}
		if before != nil {
			if err := before(read); err != nil {
				return nil, err
			}
		}
		data := s.encodeHead(h)
		newTag, err := s.b.putHead(ctx, name, data, etag)
		if errors.Is(err, errPrecondition) {
			continue
		}
		if err != nil {
			got, gotTag, rerr := s.b.getHead(ctx, name)
			if rerr != nil && !errors.Is(rerr, ErrNotFound) {
				return nil, unavailable("write head", err)
			}
			if !bytes.Equal(got, data) {
				continue
			}
			newTag = gotTag
		}
		l := &Lease{s: s, key: sessionKey, dir: kd, raw: data, etag: newTag}
		l.setHead(h)
		return l, nil
	}
	return nil, fmt.Errorf("%w: the head of the key kept moving (%d attempts)", ErrUnavailable, acquireAttempts)
}
