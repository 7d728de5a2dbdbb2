package adapter

import (
	"sort"
	"strings"
)

// minSecretLen: env values shorter than this (bytes) are not redacted from
// text, since they would match ordinary words.
const minSecretLen = 4

// redactor removes launch-env values (secrets, docs/rules.md#r3) from text
// that came from a provider before it reaches an error, log or proof.
type redactor struct{ values []string }

func newRedactor(env map[string]string) *redactor {
	r := &redactor{}
	for _, v := range env {
		if len(v) >= minSecretLen {
			r.values = append(r.values, v)
		}
	}
	// Longest first, so a secret containing another is removed whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// clean returns text with every secret replaced by "[redacted]", cut to
// 500 bytes.
func (r *redactor) clean(text string) string {
	if r == nil {
		return text
	}
	for _, v := range r.values {
		text = strings.ReplaceAll(text, v, "[redacted]")
	}
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return text
}
