package statestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// KeySize is the master key's length in bytes (PROTOCOL §10.2
// `--state-key-file`: "the 32-byte master key").
const KeySize = 32

// maxKeyFileBytes bounds what LoadKeyFile reads: a base64 key with padding
// and a newline is 45 bytes; anything much longer is not a key file.
const maxKeyFileBytes = 256

// ErrBadKey is wrapped by LoadKeyFile's errors about the file's content
// (not 32 raw bytes, not base64 of 32 bytes) and by Open when Options.Key
// is the zero MasterKey. Its text never contains key bytes.
var ErrBadKey = errors.New("statestore: bad master key")

// ErrKeyFileMode is wrapped by LoadKeyFile's error when the key file is not
// a regular file or its mode grants group or other any permission bit
// (PROTOCOL §10.2: "file mode 0600 or stricter, else the sidecar refuses to
// start").
var ErrKeyFileMode = errors.New("statestore: key file mode")

// MasterKey is the 32-byte master key under which every archive's data
// keyset is wrapped (PROTOCOL §10.2). Its zero value is "no key". It is
// never printed: String, GoString, Format and MarshalJSON/MarshalText give
// "MasterKey(<id>)" or the redacted form, never the bytes.
type MasterKey struct {
	b   [KeySize]byte
	set bool
}

// NewMasterKey returns the MasterKey made of exactly 32 bytes b (copied).
// Errors: ErrBadKey when len(b) != 32 (the error gives only the length).
func NewMasterKey(b []byte) (MasterKey, error) {
	if len(b) != KeySize {
		return MasterKey{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), KeySize)
	}
	var k MasterKey
	copy(k.b[:], b)
	k.set = true
	return k, nil
}

// LoadKeyFile reads a master key file (PROTOCOL §10.2 `--state-key-file`):
// exactly 32 raw bytes, or base64 of 32 bytes (standard or URL alphabet,
// with or without padding; surrounding ASCII whitespace such as a trailing
// newline is ignored). Symlinks are followed (Kubernetes mounts a
// Secret's keys as links into ..data/; give the volume defaultMode 0400)
// and the rules hold for the file reached. Errors: ErrKeyFileMode when
// the file is not a regular file or its mode has any group/other bit
// (0600 or stricter is required); ErrBadKey
// when the content is neither form; else the open/read error. No error text
// contains key bytes.
func LoadKeyFile(path string) (MasterKey, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // O_NONBLOCK: a fifo must not block the open
	if err != nil {
		return MasterKey{}, fmt.Errorf("statestore: key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return MasterKey{}, fmt.Errorf("statestore: key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return MasterKey{}, fmt.Errorf("%w: %s is not a regular file", ErrKeyFileMode, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return MasterKey{}, fmt.Errorf("%w: %s has mode %04o, want 0600 or stricter", ErrKeyFileMode, path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return MasterKey{}, fmt.Errorf("statestore: key file: %w", err)
	}
	defer clear(data)
	return parseKey(data)
}

// parseKey accepts 32 raw bytes or base64 (std/url, padded or not) of 32
// bytes, trimmed of ASCII whitespace.
func parseKey(data []byte) (MasterKey, error) {
	if len(data) == KeySize {
		return NewMasterKey(data)
	}
	if len(data) > maxKeyFileBytes {
		return MasterKey{}, fmt.Errorf("%w: file longer than %d bytes", ErrBadKey, maxKeyFileBytes)
	}
	t := bytes.TrimSpace(data)
	if len(t) == KeySize {
		return NewMasterKey(t)
	}
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(t))+3)
	defer clear(buf)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		n, err := enc.Decode(buf, t)
		if err == nil && n == KeySize {
			return NewMasterKey(buf[:n])
		}
	}
	return MasterKey{}, fmt.Errorf("%w: neither 32 raw bytes nor base64 of 32 bytes (%d bytes after trimming)", ErrBadKey, len(t))
}

// IsZero reports whether k holds no key.
func (k MasterKey) IsZero() bool { return !k.set }

// ID is the key's non-secret identifier (PROTOCOL §10.2
// `initialize.capabilities.stateStore.keyId`): the lowercase hex of the
// first 8 bytes of SHA-256("acpx.state.keyid\x00" || key), 16 characters;
// "" for the zero MasterKey.
func (k MasterKey) ID() string {
	if !k.set {
		return ""
	}
	h := sha256.New()
	h.Write([]byte("acpx.state.keyid\x00"))
	h.Write(k.b[:])
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// String redacts the key: "MasterKey(<ID>)" or "MasterKey(none)".
func (k MasterKey) String() string {
	if !k.set {
		return "MasterKey(none)"
	}
	return "MasterKey(" + k.ID() + ")"
}

// GoString redacts the key as String does (for %#v).
func (k MasterKey) GoString() string { return k.String() }

// Format redacts the key for every verb (%x, %s, %v, %q, …).
func (k MasterKey) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// MarshalJSON gives the redacted String as a JSON string, never the bytes.
func (k MasterKey) MarshalJSON() ([]byte, error) { return []byte(`"` + k.String() + `"`), nil }

// MarshalText gives the redacted String, never the bytes.
func (k MasterKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// bytes returns a copy of the raw key (for the wrapping AEAD only).
func (k MasterKey) bytes() []byte {
	b := make([]byte, KeySize)
	copy(b, k.b[:])
	return b
}
