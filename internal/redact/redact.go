// Package redact removes a session's launch-env values — its secrets
// (docs/rules.md#r3, docs/protocol.md §13) — from what the sidecar sends or
// keeps that came from a provider: error texts, logs and proofs (Clean),
// the strings of an agent's notifications and journal entries
// (CleanJSON), and DNS names the sidecar lowercased (CleanFold).
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf16"
)

// minSecretLen: env values shorter than this (bytes) are not redacted from
// text, since they would match ordinary words.
const minSecretLen = 4

// minOutputSecretLen: env values shorter than this (bytes) are not
// redacted from an agent's notifications, whose strings hold protocol
// words ("session", "text", "read") an env value may equal (found by a
// fresh-user trial: env X=session broke every update's envelope).
const minOutputSecretLen = 8

// existingPath reports whether v names an existing file by an absolute
// path (a value such as HOME; a token that merely starts with "/" does
// not).
func existingPath(v string) bool {
	if !filepath.IsAbs(v) {
		return false
	}
	_, err := os.Lstat(v)
	return err == nil
}

// Redactor removes launch-env values (secrets, docs/rules.md#r3) from text
// that came from a provider: values from what reaches an error, log or
// proof; output — the values of minOutputSecretLen bytes or more that are
// not an existing absolute path (HOME, TMPDIR: an agent's tools name them
// all the time) — from the strings of its notifications and journal
// entries (docs/protocol.md §13).
type Redactor struct{ values, output []string }

// New returns the Redactor of env, a session's launch environment (name →
// value): every value of minSecretLen bytes or more, in each of its JSON
// spellings (escapedForms), is removed by Clean; those also of
// minOutputSecretLen bytes or more that are not an existing absolute path
// by CleanJSON and CleanFold. A nil *Redactor removes nothing.
func New(env map[string]string) *Redactor {
	r := &Redactor{}
	for _, v := range env {
		if len(v) < minSecretLen {
			continue
		}
		// An agent that puts the value in JSON text (an error message
		// quoting its own JSON) writes it escaped: those spellings go
		// too (found by a fresh-user trial).
		forms := []string{v}
		for _, e := range escapedForms(v) {
			if e != v {
				forms = append(forms, e)
			}
		}
		r.values = append(r.values, forms...)
		if len(v) >= minOutputSecretLen && !existingPath(v) {
			r.output = append(r.output, forms...)
		}
	}
	// Longest first, so a secret containing another is removed whole.
	for _, set := range [][]string{r.values, r.output} {
		sort.Slice(set, func(i, j int) bool { return len(set[i]) > len(set[j]) })
	}
	return r
}

// Clean returns text with every secret replaced by "[redacted]", cut to
// 500 bytes (then "…" appended).
func (r *Redactor) Clean(text string) string {
	if r == nil {
		return text
	}
	text = replaceAll(text, r.values)
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return text
}

// escapedForms are v as the body of a JSON string, the ways common
// encoders write it: Go's without and with HTML escaping, and ASCII-only
// (\uXXXX for every non-ASCII rune, as Python's json.dumps does). Each
// may equal v.
func escapedForms(v string) []string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	plain := strings.TrimSuffix(b.String(), "\n")
	plain = plain[1 : len(plain)-1]
	html, _ := json.Marshal(v)
	var ascii strings.Builder
	for _, c := range plain {
		switch {
		case c < 0x80:
			ascii.WriteRune(c)
		case c > 0xFFFF:
			r1, r2 := utf16.EncodeRune(c)
			fmt.Fprintf(&ascii, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&ascii, "\\u%04x", c)
		}
	}
	return []string{plain, string(html[1 : len(html)-1]), ascii.String()}
}

// active reports whether r has any value to redact from output.
func (r *Redactor) active() bool { return r != nil && len(r.output) > 0 }

// CleanJSON returns raw, one JSON value the sidecar is about to journal or
// send (docs/protocol.md §13, §16: secrets never appear in the journal),
// with every secret (r.output) replaced by "[redacted]" in its string
// values (member names are left alone: they are the protocol's), and
// whether anything was replaced; when nothing was, it returns raw itself.
// A value holding a secret — in any JSON spelling: one with an escape is
// decoded to be sure — is decoded (numbers kept as written), cleaned
// string by string and encoded again, so what comes out is valid JSON
// whatever the secret's characters; its members come out in Go's order
// (sorted), not the agent's.
func (r *Redactor) CleanJSON(raw []byte) ([]byte, bool) {
	if !r.active() {
		return raw, false
	}
	fast := r.holds(raw)
	if !fast && bytes.IndexByte(raw, '\\') < 0 {
		return raw, false // no spelling of a secret, and no escape that could hide one
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Not JSON (cannot happen for what the sidecar encodes): replace
		// the bytes; the result is at worst invalid, never a secret.
		out := raw
		for _, s := range r.output {
			out = bytes.ReplaceAll(out, []byte(s), []byte("[redacted]"))
		}
		return out, true
	}
	if !fast && !r.anyString(v) {
		return raw, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.cleanValue(v)); err != nil {
		return []byte(`"[redacted]"`), true
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

// holds reports whether raw contains any output secret, in any spelling r
// knows.
func (r *Redactor) holds(raw []byte) bool {
	for _, s := range r.output {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// cleanValue replaces secrets in every string of a decoded JSON value.
func (r *Redactor) cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return replaceAll(x, r.output)
	case []any:
		for i := range x {
			x[i] = r.cleanValue(x[i])
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = r.cleanValue(e)
		}
		return x
	}
	return v
}

// anyString reports whether a string value of decoded v holds a secret.
func (r *Redactor) anyString(v any) bool {
	switch x := v.(type) {
	case string:
		for _, s := range r.output {
			if strings.Contains(x, s) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if r.anyString(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if r.anyString(e) {
				return true
			}
		}
	}
	return false
}

// replaceAll replaces each of values in text with "[redacted]".
func replaceAll(text string, values []string) string {
	for _, v := range values {
		text = strings.ReplaceAll(text, v, "[redacted]")
	}
	return text
}

// CleanFold is CleanJSON's replacement for one ASCII string that the
// sidecar itself may have case-folded — a DNS name in a session/network
// destination (the allow list's matching lowercases names, so an agent's
// secret used as a DNS label arrives in lower case): every output secret
// is replaced whatever the letter case of either (found by a fresh-user
// trial: a mixed-case key reached the audit and the journal). A text with
// non-ASCII bytes gets the case-sensitive replacement.
func (r *Redactor) CleanFold(text string) string {
	if !r.active() {
		return text
	}
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return replaceAll(text, r.output)
		}
	}
	// Mark the bytes every secret covers (in any case), then write the
	// text with each marked run replaced once: a later secret cannot match
	// inside an earlier replacement, and no byte of the text is taken for
	// a mark (a NUL placeholder was: an agent's NUL read as a secret).
	lower := strings.ToLower(text)
	var marked []bool
	for _, v := range r.output {
		lv := strings.ToLower(v)
		if len(lv) != len(v) {
			continue // a non-ASCII secret folds to another length: not in an ASCII text
		}
		for from := 0; ; {
			k := strings.Index(lower[from:], lv)
			if k < 0 {
				break
			}
			if marked == nil {
				marked = make([]bool, len(text))
			}
			for m := from + k; m < from+k+len(lv); m++ {
				marked[m] = true
			}
			from += k + 1
		}
	}
	if marked == nil {
		return text
	}
	var b strings.Builder
	for k := 0; k < len(text); k++ {
		if !marked[k] {
			b.WriteByte(text[k])
			continue
		}
		if k == 0 || !marked[k-1] {
			b.WriteString("[redacted]")
		}
	}
	return b.String()
}
