package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes is the largest session key accepted, in bytes
// (docs/protocol.md §8 session/open `sessionKey`: 1–512 bytes, no NUL).
const MaxKeyBytes = 512

// MaxEncodedKeyLen is the longest EncodeKey(key) the store accepts, in bytes.
// The record file is "<enc>.json" and its lock file ".<enc>.lock"; both must
// fit the Linux NAME_MAX of 255 bytes, so enc may be at most 249 bytes. Keys
// that pass the protocol's length rule can still exceed this (every byte
// outside the unreserved set costs 3), e.g. 250 ASCII letters or 84 CJK
// characters.
const MaxEncodedKeyLen = 255 - len(".") - len(".lock")

// ErrInvalidKey is wrapped by every Store method given a key that fails
// ValidateKey (empty, over MaxKeyBytes, contains NUL, not UTF-8, or encodes to
// more than MaxEncodedKeyLen bytes).
var ErrInvalidKey = errors.New("store: invalid session key")

// EncodeKey returns key encoded exactly like JavaScript's
// encodeURIComponent: every UTF-8 byte outside the unreserved set
// A-Z a-z 0-9 - _ . ! ~ * ' ( ) becomes %XX (upper-case hex). This is the
// file name stem the npm acpx runtime uses for a record id
// (docs/protocol.md §6, Records). The encoding is injective, so keys
// differing only in whitespace map to different files (docs/rules.md#r19).
// For a string that is not valid UTF-8 (where JS would throw URIError) the
// raw bytes are percent-encoded one by one; ValidateKey rejects such keys.
func EncodeKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0x0f])
	}
	return b.String()
}

func unreserved(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', '!', '~', '*', '\'', '(', ')':
		return true
	}
	return false
}

// ValidateKey reports whether key can name a record: 1–MaxKeyBytes bytes, no
// NUL, valid UTF-8 (docs/protocol.md §8 session/open `sessionKey`), and
// EncodeKey(key) at most MaxEncodedKeyLen bytes (file-name limit). Keys are
// compared exactly; no trimming or normalisation is applied
// (docs/rules.md#r19). The error wraps ErrInvalidKey and does not echo the
// key.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains NUL", ErrInvalidKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	if n := len(EncodeKey(key)); n > MaxEncodedKeyLen {
		return fmt.Errorf("%w: encoded name is %d bytes, limit %d", ErrInvalidKey, n, MaxEncodedKeyLen)
	}
	return nil
}
