package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecordDecode decodes arbitrary record file bytes as Store.Load does
// (docs/protocol.md §6 records; the acpx.session.v1 schema): nothing
// panics; a record that decodes encodes again, and that encoding is a
// fixed point (decode + encode gives the same bytes), so a load/save
// cycle never drifts; a record that passes Validate can be written as a
// file; and Load of the same bytes on disk returns either the record or
// an error wrapping ErrCorrupt.
func FuzzRecordDecode(f *testing.F) {
	// The acpx@0.19.1 fixture (testdata/README.md) seeds the corpus.
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "acpx-0.19.1-record.json")); err == nil {
		f.Add(b)
	} else {
		f.Fatalf("fixture: %v", err)
	}
	for _, s := range []string{
		`{"schema":"acpx.session.v1","acpx_record_id":"k","acp_session_id":"a","agent_command":"x","cwd":"/","messages":[]}`,
		`{"schema":"acpx.session.v1","acpx_record_id":"k","last_seq":-1,"pid":0,"messages":{},"extra":{"z":null,"a":[1,2]}}`,
		`{"acpx":{"request_ids":["a","a"],"current_model_id":""},"cumulative_token_usage":{"input_tokens":-5}}`,
		`{"schema":1,"acpx_record_id":null}`, `[]`, `{"a":1,"a":2}`, "{\"\xff\":1}",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	st, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Record
		if err := r.UnmarshalJSON(in); err == nil {
			enc, err := r.MarshalJSON()
			if err != nil {
				t.Fatalf("a decoded record does not encode: %v", err)
			}
			if !json.Valid(enc) {
				t.Fatalf("encoding is not JSON: %q", enc)
			}
			var r2 Record
			if err := r2.UnmarshalJSON(enc); err != nil {
				t.Fatalf("own encoding %q does not decode: %v", enc, err)
			}
			enc2, err := r2.MarshalJSON()
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("encoding is not a fixed point:\n%s\n%s (%v)", enc, enc2, err)
			}
			if r.Validate() == nil {
				if _, err := encodeFile(&r); err != nil {
					t.Fatalf("a valid record cannot be written: %v", err)
				}
			}
		}
		if err := os.WriteFile(st.RecordPath("k"), in, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load("k"); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Load: %v, want nil or ErrCorrupt", err)
		}
	})
}
