//go:build linux

package reaper

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestShapes_MatchTheirPatterns: the hand-written checks of a session id
// and a Spec.Name accept exactly what their patterns accept, on edge
// cases and on random strings over the alphabets around them.
func TestShapes_MatchTheirPatterns(t *testing.T) {
	for _, c := range []struct {
		name  string
		re    *regexp.Regexp
		check func(string) bool
		alpha string
		cases []string
	}{
		{"IsSessionID", regexp.MustCompile(`^s-[0-9a-f]{1,64}$`), IsSessionID, "s-0123456789abcdefgAF \n",
			[]string{"", "s-", "s-0", "s-" + strings.Repeat("a", 64), "s-" + strings.Repeat("a", 65), "S-1", "s-1\n", "xs-1", "s-G"}},
		{"validName", regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`), validName, "aZ09._-/ \n\x00é",
			[]string{"", "a", strings.Repeat("x", 64), strings.Repeat("x", 65), "a/b", "a b", "acpx-s-1", "é"}},
	} {
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 20000; i++ {
			b := make([]byte, r.IntN(70))
			for j := range b {
				b[j] = c.alpha[r.IntN(len(c.alpha))]
			}
			if r.IntN(2) == 0 && len(b) > 1 {
				b[0], b[1] = 's', '-'
			}
			c.cases = append(c.cases, string(b))
		}
		for _, s := range c.cases {
			if got, want := c.check(s), c.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the pattern says %v", c.name, s, got, want)
			}
		}
	}
}
