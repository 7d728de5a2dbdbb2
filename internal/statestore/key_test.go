package statestore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func writeKeyFile(t *testing.T, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadKeyFile_AcceptsRawAndBase64: 32 raw bytes, and base64 (std and
// URL alphabets, padded or not, with a trailing newline) give the same key
// (PROTOCOL §10.2 `--state-key-file`: "raw or base64").
func TestLoadKeyFile_AcceptsRawAndBase64(t *testing.T) {
	raw := make([]byte, 32)
	for {
		rand.Read(raw)
		// make sure std and URL alphabets differ for this key
		if s := base64.StdEncoding.EncodeToString(raw); strings.ContainsAny(s, "+/") {
			break
		}
	}
	want, _ := NewMasterKey(raw)
	forms := map[string][]byte{
		"raw":            raw,
		"std":            []byte(base64.StdEncoding.EncodeToString(raw)),
		"std-newline":    []byte(base64.StdEncoding.EncodeToString(raw) + "\n"),
		"raw-std":        []byte(base64.RawStdEncoding.EncodeToString(raw) + "\r\n"),
		"url":            []byte(base64.URLEncoding.EncodeToString(raw)),
		"raw-url-spaces": []byte("  " + base64.RawURLEncoding.EncodeToString(raw) + "\n"),
	}
	for name, data := range forms {
		for _, mode := range []os.FileMode{0o600, 0o400} {
			k, err := LoadKeyFile(writeKeyFile(t, data, mode))
			if err != nil {
				t.Fatalf("%s (%v): %v", name, mode, err)
			}
			if k.ID() != want.ID() || !bytes.Equal(k.bytes(), raw) {
				t.Fatalf("%s: a different key", name)
			}
		}
	}
}

// TestLoadKeyFile_RefusesLooseModesAndNonFiles: any group/other bit, a
// directory or a fifo is refused (PROTOCOL §10.2: "file mode 0600 or
// stricter, else the sidecar refuses to start"); a symlink is followed
// (Kubernetes mounts a Secret's keys as links) and the file it reaches
// must pass the same rules; the error never shows the key.
func TestLoadKeyFile_RefusesLooseModesAndNonFiles(t *testing.T) {
	raw := bytes.Repeat([]byte{0xAB}, 32)
	b64 := base64.StdEncoding.EncodeToString(raw)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660, 0o601, 0o610} {
		_, err := LoadKeyFile(writeKeyFile(t, []byte(b64), mode))
		if !errors.Is(err, ErrKeyFileMode) {
			t.Fatalf("mode %04o: %v, want ErrKeyFileMode", mode, err)
		}
		checkNoKey(t, err.Error(), raw)
	}
	dir := t.TempDir()
	if _, err := LoadKeyFile(dir); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	if _, err := LoadKeyFile(fifo); err == nil {
		t.Fatal("fifo accepted")
	}
	link := filepath.Join(dir, "link")
	os.Symlink(writeKeyFile(t, raw, 0o600), link)
	if k, err := LoadKeyFile(link); err != nil || k.IsZero() {
		t.Fatalf("a link to a 0600 key file: %v", err)
	}
	loose := filepath.Join(dir, "loose-link")
	os.Symlink(writeKeyFile(t, raw, 0o644), loose)
	if _, err := LoadKeyFile(loose); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("a link to a 0644 key file: %v, want ErrKeyFileMode", err)
	}
	for _, bad := range [][]byte{[]byte("short"), bytes.Repeat([]byte("A"), 300), []byte(b64[:40] + "!!!!")} {
		_, err := LoadKeyFile(writeKeyFile(t, bad, 0o600))
		if !errors.Is(err, ErrBadKey) {
			t.Fatalf("content %q: %v, want ErrBadKey", bad[:5], err)
		}
		checkNoKey(t, err.Error(), bad)
	}
}

// checkNoKey fails if s contains the key bytes or any base64 or hex form
// of them.
func checkNoKey(t testing.TB, s string, raw []byte) {
	t.Helper()
	for _, form := range keyForms(raw) {
		if strings.Contains(s, string(form)) {
			t.Fatalf("key material %q found in %q", form, s)
		}
	}
}

func keyForms(raw []byte) [][]byte {
	return [][]byte{raw, []byte(base64.StdEncoding.EncodeToString(raw)), []byte(base64.RawStdEncoding.EncodeToString(raw)),
		[]byte(base64.URLEncoding.EncodeToString(raw)), []byte(base64.RawURLEncoding.EncodeToString(raw)),
		[]byte(hex.EncodeToString(raw)), []byte(strings.ToUpper(hex.EncodeToString(raw)))}
}

// TestMasterKey_NeverPrinted: every fmt verb, %#v, JSON and text
// marshaling show the redacted ID form; ID is the documented hash.
func TestMasterKey_NeverPrinted(t *testing.T) {
	raw := bytes.Repeat([]byte{0x5A}, 32)
	k, _ := NewMasterKey(raw)
	h := sha256.Sum256(append([]byte("acpx.state.keyid\x00"), raw...))
	if k.ID() != hex.EncodeToString(h[:8]) {
		t.Fatalf("ID %s", k.ID())
	}
	j, _ := json.Marshal(struct{ K MasterKey }{k})
	outs := []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %X %q", k, k, k, k, k, k, k), string(j),
		fmt.Sprintf("%v", Options{Key: k, OldKey: &k})}
	for _, o := range outs {
		checkNoKey(t, o, raw)
		if !strings.Contains(o, k.ID()) {
			t.Fatalf("%q lacks the key id", o)
		}
	}
	if (MasterKey{}).String() != "MasterKey(none)" {
		t.Fatal((MasterKey{}).String())
	}
}

// TestOldKey_OpensArchivesPublishedUnderIt: after a key rotation an
// archive published under the old key restores with OldKey set, and does
// not without it (PROTOCOL §10.2 `--state-old-key-file`).
func TestOldKey_OpensArchivesPublishedUnderIt(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		old, cur := testKey(t), testKey(t)
		src := filepath.Join(t.TempDir(), "home")
		makeTree(t, src, sampleTree)
		s1 := mk(Options{Key: old})
		l1, _ := s1.Acquire(ctx, "k")
		if _, err := s1.Publish(ctx, l1, []Source{{Name: "home", Path: src}}); err != nil {
			t.Fatal(err)
		}
		without := mk(Options{Key: cur})
		lw, _ := without.Acquire(ctx, "k")
		if _, err := without.Restore(ctx, lw, map[string]string{"home": filepath.Join(t.TempDir(), "h")}, t.TempDir()); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("restore without the old key: %v, want ErrCorrupt", err)
		}
		with := mk(Options{Key: cur, OldKey: &old})
		l2, _ := with.Acquire(ctx, "k")
		target := filepath.Join(t.TempDir(), "h")
		if _, err := with.Restore(ctx, l2, map[string]string{"home": target}, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		sameTree(t, src, target)
		if with.KeyID() != cur.ID() {
			t.Fatal("KeyID is not the current key's")
		}
	})
}

// TestSecrets_KeyNeverInTheStore: after publications, a fenced publish and
// failed restores, neither the file store's directory nor versitygw's
// backing directory holds the master key in any form, and no error text
// does (PROTOCOL §10.2: "The master key ... never appear in a log,
// record, journal, proof, error").
func TestSecrets_KeyNeverInTheStore(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		key := testKey(t)
		raw := key.bytes()
		src := filepath.Join(t.TempDir(), "home")
		makeTree(t, src, sampleTree)
		a, b := mk(Options{Key: key}), mk(Options{Key: key, Owner: Owner{SidecarID: "B"}})
		var errs []string
		la, _ := a.Acquire(ctx, "k")
		for range 2 {
			if _, err := a.Publish(ctx, la, []Source{{Name: "home", Path: src}}); err != nil {
				t.Fatal(err)
			}
		}
		lb, _ := b.Acquire(ctx, "k")
		if _, err := a.Publish(ctx, la, []Source{{Name: "home", Path: src}}); err != nil {
			errs = append(errs, err.Error())
		}
		wrong := mk(Options{})
		lw, _ := wrong.Acquire(ctx, "k")
		if _, err := wrong.Restore(ctx, lw, map[string]string{"home": filepath.Join(t.TempDir(), "x")}, t.TempDir()); err != nil {
			errs = append(errs, err.Error())
		}
		_ = lb
		if len(errs) != 2 {
			t.Fatalf("expected two errors, got %v", errs)
		}
		for _, e := range errs {
			checkNoKey(t, e, raw)
		}
		var dir string
		switch be := a.b.(type) {
		case *fileBackend:
			dir = be.root
		case *s3Backend:
			dir = s3srv.Dir()
		}
		n := 0
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			n++
			for _, form := range keyForms(raw) {
				if bytes.Contains(data, form) {
					t.Fatalf("%s holds the master key", p)
				}
			}
			return nil
		})
		if n < 3 {
			t.Fatalf("scanned only %d files under %s", n, dir)
		}
	})
}
