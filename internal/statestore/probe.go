package statestore

import (
	"context"
	"errors"
)

// errProbeDone ends Probe's listing at its first entry.
var errProbeDone = errors.New("probe: one entry is enough")

// Probe checks that the store can be reached and read now: it lists the
// keys/ prefix up to its first entry (an S3 ListObjectsV2 page; a
// directory read for file://), which needs the bucket, the endpoint and
// credentials the store accepts. `acpx-sidecar doctor` reports it; the
// daemon does not (a store that is down at start serves opens once it is
// back). Errors: ErrUnavailable wrapping the backend's (a refused
// signature, a missing bucket, an endpoint that does not answer within
// the store's timeout), never a secret.
func (s *Store) Probe(ctx context.Context) error {
	err := s.b.list(ctx, "keys/", func(string) error { return errProbeDone })
	if err == nil || errors.Is(err, errProbeDone) {
		return nil
	}
	return unavailable("list keys/", err)
}
