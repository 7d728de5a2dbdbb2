package jsonl

import (
	"encoding/json"
	"unicode/utf8"
)

// Host frames are always valid NDJSON (docs/protocol.md, "Threat model"):
// what an agent sent reaches a host only as valid UTF-8, with no raw
// control byte outside strings (inside strings JSON allows none). A host
// that splits lines on CR as well as LF (Node's readline does) would
// otherwise read a forged frame out of a CR between an update's tokens.

// replacement is U+FFFD REPLACEMENT CHARACTER in UTF-8.
const replacement = "\uFFFD"

// Clean appends raw — one valid JSON value (as Scan or encoding/json
// accepted it) — to dst with its insignificant white space dropped and
// every byte of a string that does not begin a valid UTF-8 sequence
// replaced by U+FFFD (as encoding/json and the WHATWG decoder replace
// them: one U+FFFD per such byte). Escape sequences are kept as they are
// (an escaped lone surrogate is valid JSON; hosts decode it as U+FFFD or
// keep it). The result is valid JSON, valid UTF-8, with no byte below 0x20.
func Clean(dst, raw []byte) []byte {
	inString := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, replacement...)
			} else {
				dst = append(dst, raw[i:i+n]...)
			}
			i += n
			continue
		case inString:
			dst = append(dst, c)
			switch c {
			case '\\':
				if i+1 < len(raw) {
					dst = append(dst, raw[i+1])
					i++
				}
			case '"':
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			// insignificant white space: dropped
		default:
			if c == '"' {
				inString = true
			}
			dst = append(dst, c)
		}
		i++
	}
	return dst
}

// IsClean reports whether raw (valid JSON) can reach a host verbatim:
// valid UTF-8 and no control byte (a tab, CR or LF between tokens; JSON
// strings hold none).
func IsClean(raw []byte) bool {
	for _, c := range raw {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(raw)
}

// CleanRaw returns raw itself when IsClean, else a cleaned copy (Clean).
// For JSON an agent sent that is kept raw and reported to a host later
// (capabilities, config options, permission tool calls).
func CleanRaw(raw json.RawMessage) json.RawMessage {
	if IsClean(raw) {
		return raw
	}
	return Clean(make([]byte, 0, len(raw)+8), raw)
}

// CleanRaws cleans each element of raws in place (CleanRaw) and returns
// raws.
func CleanRaws(raws []json.RawMessage) []json.RawMessage {
	for i := range raws {
		raws[i] = CleanRaw(raws[i])
	}
	return raws
}
