package store

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var encodeKeyCases = []struct{ in, want string }{
	{"peer-0", "peer-0"},
	{"a", "a"},
	{" a ", "%20a%20"},
	{"a\tb\n", "a%09b%0A"},
	{"dir/sub", "dir%2Fsub"},
	{"100%", "100%25"},
	{"!'()*~-_.", "!'()*~-_."},
	{"a+b=c&d?e#f", "a%2Bb%3Dc%26d%3Fe%23f"},
	{"ünï", "%C3%BCn%C3%AF"},
	{"日本", "%E6%97%A5%E6%9C%AC"},
	{"🦀", "%F0%9F%A6%80"},
	{`"\`, "%22%5C"},
	{"..", ".."},
	{"ABCxyz019", "ABCxyz019"},
	{"[]{}|^`<>:;@$,", "%5B%5D%7B%7D%7C%5E%60%3C%3E%3A%3B%40%24%2C"},
}

// TestEncodeKey_MatchesEncodeURIComponent checks the table against the
// definition of JS encodeURIComponent (docs/protocol.md §6, Records).
func TestEncodeKey_MatchesEncodeURIComponent(t *testing.T) {
	for _, c := range encodeKeyCases {
		if got := EncodeKey(c.in); got != c.want {
			t.Errorf("EncodeKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEncodeKey_AgreesWithNode runs the same table (plus every byte value)
// through node's encodeURIComponent, when node is installed.
func TestEncodeKey_AgreesWithNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	var in []string
	for _, c := range encodeKeyCases {
		in = append(in, c.in)
	}
	var all strings.Builder
	for r := rune(1); r < 0x800; r++ {
		all.WriteRune(r)
	}
	in = append(in, all.String())
	b, _ := json.Marshal(in)
	cmd := exec.Command(node, "-e", `let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.stringify(JSON.parse(s).map(encodeURIComponent))))`)
	cmd.Env = markedEnv()
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, k := range in {
		if got := EncodeKey(k); got != want[i] {
			t.Errorf("EncodeKey(%q) = %q, node says %q", k, got, want[i])
		}
	}
}

// TestValidateKey covers the sessionKey limits (docs/protocol.md §8
// session/open) and the file-name limit.
func TestValidateKey(t *testing.T) {
	ok := []string{"a", " a ", strings.Repeat("x", MaxEncodedKeyLen), strings.Repeat("é", MaxEncodedKeyLen/6)}
	for _, k := range ok {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q): %v", k, err)
		}
	}
	bad := []string{"", "a\x00b", "\xff", strings.Repeat("x", MaxEncodedKeyLen+1), strings.Repeat("é", MaxEncodedKeyLen/6+1), strings.Repeat("x", MaxKeyBytes+1)}
	for _, k := range bad {
		if err := ValidateKey(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%.20q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

// TestStore_WhitespaceDistinctKeysAreDistinctFiles: "a", " a ", "a " are
// three records (docs/rules.md#r19).
func TestStore_WhitespaceDistinctKeysAreDistinctFiles(t *testing.T) {
	s := openTemp(t)
	keys := []string{"a", " a ", "a ", "\ta"}
	for i, k := range keys {
		r := newRecord(k)
		r.LastSeq = int64(i)
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i, k := range keys {
		p := s.RecordPath(k)
		if seen[p] {
			t.Fatalf("key %q shares file %s", k, p)
		}
		seen[p] = true
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		r, err := s.Load(k)
		if err != nil {
			t.Fatal(err)
		}
		if r.SessionKey != k || r.LastSeq != int64(i) {
			t.Errorf("Load(%q) = id %q seq %d", k, r.SessionKey, r.LastSeq)
		}
	}
	if _, err := s.Load("  a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(\"  a\") = %v, want ErrNotFound", err)
	}
}
