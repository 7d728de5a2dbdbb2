package cleanup

import (
	"encoding/json"
	"fmt"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ProofSink is where a finished proof goes once no session actor is there
// to send it (a retained cleanup's final proof, a recovered proof, a
// shutdown's proofs): the session key's journal in one state directory and
// the host. internal/session's proofSink implements it over the
// Manager's journal and key-lock registries; the unit tests with a fake.
type ProofSink interface {
	// HoldKey takes this sidecar's hold of key's lock for the journal
	// write. An error (store.ErrKeyHeld: another sidecar opened the key
	// since) means the key's journal is not this sidecar's to write.
	HoldKey(key string) (release func(), err error)
	// Journal appends raw (`cleanup/proof` params) to key's journal as an
	// entry of session and syncs it.
	Journal(key, session string, raw json.RawMessage) error
	// Notify sends raw to the host as `cleanup/proof`.
	Notify(raw json.RawMessage) error
}

// Delivery says where Publish takes a proof.
type Delivery struct {
	// Journal: append it to the key's journal (false when the journal was
	// deleted with the record, docs/protocol.md §8 session/close discard).
	Journal bool
	// Notify: send it to the host (false when a `shutdown` result carries
	// it, docs/protocol.md §16 "Proofs at shutdown").
	Notify bool
}

// Published is what Publish did: Raw is the `cleanup/proof` params it
// encoded (nil if p could not be encoded: Err says why); Journaled
// whether the journal has the entry, and JournalErr why not when it was
// asked to; NotifyErr a failed send.
type Published struct {
	// Raw is the encoded `cleanup/proof` params; nil when Err is set.
	Raw json.RawMessage
	// Journaled: the entry was appended to the key's journal and synced.
	Journaled bool
	// JournalErr is why the journal write failed, or the key's hold could
	// not be taken; nil when it worked or was not asked for.
	JournalErr error
	// NotifyErr is the failed send's error; nil when it worked or was not
	// asked for.
	NotifyErr error
	// Err is set when the proof could not be encoded: nothing was done.
	Err error
}

// Publish hands finished proof p on, in the order a host catching up
// relies on (docs/protocol.md §16, Session journal): first into the
// journal of p.SessionKey, synced, while holding the key — a key another
// sidecar holds now is left alone — then to the host. A journal that
// cannot be written does not stop the send.
func Publish(sink ProofSink, p *protocol.Proof, d Delivery) Published {
	raw, err := json.Marshal(protocol.ProofNotice{Proof: p})
	if err != nil {
		return Published{Err: fmt.Errorf("cleanup: proof not encodable: %w", err)}
	}
	res := Published{Raw: raw}
	if d.Journal && p.SessionKey != "" {
		if release, err := sink.HoldKey(p.SessionKey); err != nil {
			res.JournalErr = err
		} else {
			res.JournalErr = sink.Journal(p.SessionKey, p.Session, raw)
			res.Journaled = res.JournalErr == nil
			release()
		}
	}
	if d.Notify {
		res.NotifyErr = sink.Notify(raw)
	}
	return res
}
