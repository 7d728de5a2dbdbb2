package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flagDefaults parses `acpx-sidecar -h`: each flag's default as the help
// prints it ("" when the help prints none: the flag's zero value).
func flagDefaults(t *testing.T) map[string]string {
	t.Helper()
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); err == nil {
		t.Fatal("-h: no flag.ErrHelp")
	}
	defs := map[string]string{}
	name := ""
	deflt := regexp.MustCompile(`\(default "?(.*?)"?\)$`)
	for _, line := range strings.Split(help.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name = strings.Fields(line)[0][1:]
			defs[name] = ""
		case name != "" && strings.HasPrefix(line, "    \t"):
			if m := deflt.FindStringSubmatch(line); m != nil {
				defs[name] = m[1]
			}
		}
	}
	if len(defs) < 20 {
		t.Fatalf("parsed %d flags from -h:\n%s", len(defs), help.String())
	}
	return defs
}

// TestFlagDefaults_MatchProtocolDoc: docs/protocol.md §2's flag table
// states the default the flag has (the value the help prints, read from
// config.DefaultBounds / DefaultCaps and the constants they name), lists
// every flag, and lists no flag that does not exist. A default given as
// `0` there is a flag whose help prints none.
func TestFlagDefaults_MatchProtocolDoc(t *testing.T) {
	defs := flagDefaults(t)
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\|([^|]*)\\|")
	quoted := regexp.MustCompile("^`([^`]*)`")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, col := m[1], strings.TrimSpace(m[2])
		seen[name] = true
		got, ok := defs[name]
		if !ok {
			t.Errorf("docs/protocol.md lists --%s, which is no flag", name)
			continue
		}
		q := quoted.FindStringSubmatch(col)
		if q == nil || strings.Contains(q[1], "$") {
			continue // "auto", "—", "": described, not a value; $HOME depends on the machine
		}
		want := q[1]
		if got == "" && (want == "0" || want == "false") {
			continue // the zero value, which the help does not print
		}
		if got != want {
			t.Errorf("--%s: docs/protocol.md says default %s, the flag has %q", name, col, got)
		}
	}
	for name := range defs {
		if !seen[name] {
			t.Errorf("--%s is not in docs/protocol.md's flag table", name)
		}
	}
}

// TestFlagDefaults_MatchRulesBounds: docs/rules.md#bounds states each
// bound's default as the flag has it (in s or ms; the shutdown row's
// value is its "= 7 s").
func TestFlagDefaults_MatchRulesBounds(t *testing.T) {
	defs := flagDefaults(t)
	doc, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, `<a id="bounds"></a>`)
	if start < 0 {
		t.Fatal("docs/rules.md has no bounds anchor")
	}
	text = text[start:]
	row := regexp.MustCompile("(?m)^\\| ([^|]*) \\| ([^|]*) \\| ([^|]*`--[^|]*) \\|$")
	flagName := regexp.MustCompile("`--([a-z-]+)`")
	withUnit := regexp.MustCompile(`(\d+) (ms|s)\b`)
	bare := regexp.MustCompile(`^\d+`)
	n := 0
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		flags := flagName.FindAllStringSubmatch(m[3], -1)
		var vals []int64
		for _, v := range withUnit.FindAllStringSubmatch(m[2], -1) {
			x, _ := strconv.ParseInt(v[1], 10, 64)
			if v[2] == "s" {
				x *= int64(time.Second / time.Millisecond)
			}
			vals = append(vals, x)
		}
		if len(vals) == 0 {
			x, err := strconv.ParseInt(bare.FindString(strings.TrimSpace(m[2])), 10, 64)
			if err != nil {
				t.Errorf("docs/rules.md bounds row %q: no value", m[1])
				continue
			}
			vals = []int64{x}
		}
		vals = vals[max(len(vals)-len(flags), 0):] // "close + TERM + KILL + 1 s = 7 s": the last
		for i, f := range flags {
			got := defs[f[1]]
			if f[1] == "shutdown-ms" && got == "" {
				var o *options
				o, err = parseFlags(nil, &bytes.Buffer{})
				if err != nil {
					t.Fatal(err)
				}
				got = strconv.FormatInt(o.bounds.shutdownMs, 10)
			}
			if i >= len(vals) || got != strconv.FormatInt(vals[i], 10) {
				t.Errorf("docs/rules.md bounds row %q: %s for --%s, the flag has %q", m[1], m[2], f[1], got)
			}
			n++
		}
	}
	if n < 9 {
		t.Errorf("checked %d bounds in docs/rules.md, want the 9 of initialize.bounds", n)
	}
}
