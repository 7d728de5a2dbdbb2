package statestore

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestPublish_SkipsAndListsWhatTheLinkRuleForbids: links in a chain,
// absolute links, links that climb out, dangling links, links not in
// clean form, links through a linked directory, and fifos are skipped and
// listed; everything else is archived and restored (PROTOCOL §10.2
// "Archive").
func TestPublish_SkipsAndListsWhatTheLinkRuleForbids(t *testing.T) {
	ctx := ctxT(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600)
	src := filepath.Join(t.TempDir(), "home")
	makeTree(t, src, map[string]node{
		"d":          {kind: 'd', mode: 0o755},
		"d/f":        {kind: 'f', mode: 0o600, data: "f"},
		"ok":         {kind: 'l', data: "d/f"},
		"ok-dir":     {kind: 'l', data: "d"},
		"chain":      {kind: 'l', data: "ok"},
		"through":    {kind: 'l', data: "ok-dir/f"},
		"abs":        {kind: 'l', data: filepath.Join(outside, "secret")},
		"up":         {kind: 'l', data: "../../" + filepath.Base(outside) + "/secret"},
		"d/up-ok":    {kind: 'l', data: "../d/f"},
		"dangling":   {kind: 'l', data: "nothing"},
		"unclean":    {kind: 'l', data: "./d/f"},
		"fifo":       {kind: 'p'},
		"plain.json": {kind: 'f', mode: 0o644, data: "{}"},
	})
	s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
	l, _ := s.Acquire(ctx, "k")
	pub, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sk := range pub.Skipped {
		got[sk.Path] = sk.Reason
	}
	want := map[string]string{
		"home/chain":    "link to a link",
		"home/through":  "link to a link",
		"home/abs":      "absolute target",
		"home/up":       "target outside the source",
		"home/dangling": "dangling link",
		"home/unclean":  "target not in clean form",
		"home/fifo":     "device, fifo or socket",
	}
	if len(got) != len(want) || pub.SkippedTotal != int64(len(want)) {
		t.Fatalf("skipped %v (total %d), want %v", got, pub.SkippedTotal, want)
	}
	for p, r := range want {
		if got[p] != r {
			t.Errorf("skipped[%s] = %q, want %q", p, got[p], r)
		}
	}
	target := filepath.Join(t.TempDir(), "home")
	if _, err := s.Restore(ctx, l, map[string]string{"home": target}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	names := listDir(t, target)
	sort.Strings(names)
	if strings.Join(names, ",") != "d,ok,ok-dir,plain.json" {
		t.Fatalf("restored %v", names)
	}
	if l, _ := os.Readlink(filepath.Join(target, "d", "up-ok")); l != "../d/f" {
		t.Fatalf("d/up-ok -> %q", l)
	}
}

// TestPublish_OverALimitIsTooLargeAndPublishesNothing: a file over
// MaxFileBytes, more entries than MaxEntries, or more bytes than MaxBytes
// fail ErrTooLarge while streaming; the head and the store's archives
// stay as they were (PROTOCOL §10.2 limits "enforced while streaming").
func TestPublish_OverALimitIsTooLargeAndPublishesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  Limits
	}{
		{"file", Limits{MaxFileBytes: 10}},
		{"entries", Limits{MaxEntries: 3}},
		{"bytes", Limits{MaxBytes: 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			src := filepath.Join(t.TempDir(), "home")
			makeTree(t, src, map[string]node{"a": {kind: 'f', mode: 0o600, data: "12345678"},
				"b": {kind: 'f', mode: 0o600, data: "12345678901"}, "c": {kind: 'f', mode: 0o600}})
			s := mustOpen(t, Options{URL: "file://" + t.TempDir(), Limits: tc.lim})
			l, _ := s.Acquire(ctx, "k")
			before := rawHead(t, s, "k")
			if _, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}}); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Publish: %v, want ErrTooLarge", err)
			}
			if !bytes.Equal(before, rawHead(t, s, "k")) {
				t.Fatal("head changed")
			}
			kd, _ := keyDir("k")
			if n := listDir(t, filepath.Join(s.b.(*fileBackend).root, kd, "archives")); len(n) != 0 {
				t.Fatalf("archives dir holds %v", n)
			}
		})
	}
}

// TestRestore_OverALimitIsTooLargeAndPlacesNothing: a restore under
// smaller limits than the publication's stops while streaming with
// ErrTooLarge; the target is not made and the scratch parent is empty.
func TestRestore_OverALimitIsTooLargeAndPlacesNothing(t *testing.T) {
	for _, lim := range []Limits{{MaxFileBytes: 10}, {MaxEntries: 5}, {MaxBytes: 20}} {
		ctx := ctxT(t)
		src := filepath.Join(t.TempDir(), "home")
		makeTree(t, src, sampleTree)
		s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
		l, _ := s.Acquire(ctx, "k")
		if _, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}}); err != nil {
			t.Fatal(err)
		}
		s.lim = lim.withDefaults()
		env, scratch := t.TempDir(), t.TempDir()
		if _, err := s.Restore(ctx, l, map[string]string{"home": filepath.Join(env, "home")}, scratch); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Restore under %+v: %v, want ErrTooLarge", lim, err)
		}
		if n := append(listDir(t, env), listDir(t, scratch)...); len(n) != 0 {
			t.Fatalf("restore under %+v left %v", lim, n)
		}
	}
}

// TestRestore_CraftedArchivesAreCorrupt: archives sealed with the right
// key but built against the rules — a path with "..", an absolute path, a
// file through a symlink, a link that escapes, duplicate names, entries
// out of order, a child without its directory, a hard link, a manifest
// that lies, no manifest, an entry after it — fail ErrCorrupt and nothing
// is written outside the fresh directory (the target's parent and the
// scratch parent are empty afterwards).
func TestRestore_CraftedArchivesAreCorrupt(t *testing.T) {
	d := func(n string) tarEntry { return tarEntry{typ: tar.TypeDir, name: n, mode: 0o755} }
	f := func(n, body string) tarEntry { return tarEntry{typ: tar.TypeReg, name: n, mode: 0o644, body: body} }
	ln := func(n, to string) tarEntry { return tarEntry{typ: tar.TypeSymlink, name: n, link: to} }
	lie := `{"t":"d","p":"s","m":493}` + "\n" + `{"t":"f","p":"s/f","m":420,"s":1,"h":"00"}` + "\n"
	cases := []struct {
		name       string
		entries    []tarEntry
		manifest   *string
		noManifest bool
		extra      []tarEntry
	}{
		{name: "dotdot-top", entries: []tarEntry{f("../x", "x")}},
		{name: "dotdot-inner", entries: []tarEntry{d("s/"), f("s/../../x", "x")}},
		{name: "absolute", entries: []tarEntry{f("/tmp/acpx-abs-x", "x")}},
		{name: "file-through-symlink", entries: []tarEntry{d("s/"), d("s/d/"), ln("s/l", "d"), f("s/l/x", "x")}},
		{name: "link-escapes", entries: []tarEntry{d("s/"), ln("s/l", "../../x")}},
		{name: "link-absolute", entries: []tarEntry{d("s/"), ln("s/l", "/etc")}},
		{name: "link-at-top", entries: []tarEntry{ln("s", "x")}},
		{name: "duplicate", entries: []tarEntry{d("s/"), f("s/f", "1"), f("s/f", "2")}},
		{name: "duplicate-dir", entries: []tarEntry{d("s/"), d("s/")}},
		{name: "out-of-order", entries: []tarEntry{d("s/"), f("s/b", "1"), f("s/a", "2")}},
		{name: "missing-parent", entries: []tarEntry{d("s/"), f("s/d/f", "1")}},
		{name: "hard-link", entries: []tarEntry{d("s/"), f("s/a", "1"), {typ: tar.TypeLink, name: "s/b", link: "s/a"}}},
		{name: "reserved-name", entries: []tarEntry{f(".acpx-x", "1")}},
		{name: "manifest-lies", entries: []tarEntry{d("s/"), f("s/f", "1")}, manifest: &lie},
		{name: "manifest-missing-line", entries: []tarEntry{d("s/"), f("s/f", "1")}, manifest: strPtr(`{"t":"d","p":"s","m":493}` + "\n")},
		{name: "no-manifest", entries: []tarEntry{d("s/"), f("s/f", "1")}, noManifest: true},
		{name: "after-manifest", entries: []tarEntry{d("s/")}, extra: []tarEntry{f("s/late", "1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			s := mustOpen(t, Options{URL: "file://" + t.TempDir()})
			l, _ := s.Acquire(ctx, "k")
			gen := l.Head().Generation + 1
			obj := sealObject(t, s.key, "k", gen, craftTar(t, tc.entries, tc.manifest, tc.noManifest, tc.extra...))
			ref := plant(t, s, l, gen, obj)
			setHead(t, s, l, &ref, nil)
			env, scratch := t.TempDir(), t.TempDir()
			_, err := s.Restore(ctx, l, map[string]string{"s": filepath.Join(env, "s"), "x": filepath.Join(env, "x")}, scratch)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Restore: %v, want ErrCorrupt", err)
			}
			if n := append(listDir(t, env), listDir(t, scratch)...); len(n) != 0 {
				t.Fatalf("a corrupt archive left %v", n)
			}
			if _, err := os.Lstat("/tmp/acpx-abs-x"); err == nil {
				t.Fatal("an absolute path was written")
			}
		})
	}
}

func strPtr(s string) *string { return &s }

// TestRestore_BadObjectsFallBackToPrevious: a head whose archive is
// truncated, has two segments swapped, a flipped byte, was sealed for
// another session key or generation or under another master key, or was
// copied from another key's archives is ErrCorrupt, and the head's
// previous archive is restored instead; when both are bad, Restore fails
// ErrCorrupt and places nothing (PROTOCOL §10.2 "A bad archive is
// STATE_CORRUPT (the previous one is tried next)").
func TestRestore_BadObjectsFallBackToPrevious(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(Options) *Store) {
		ctx := ctxT(t)
		src := filepath.Join(t.TempDir(), "home")
		rnd := make([]byte, 4<<20) // many AEAD segments
		rand.Read(rnd)
		makeTree(t, src, map[string]node{"big": {kind: 'f', mode: 0o600, data: string(rnd)}, "note": {kind: 'f', mode: 0o644, data: "n"}})
		s := mk(Options{})
		l, _ := s.Acquire(ctx, "k")
		good, err := s.Publish(ctx, l, []Source{{Name: "home", Path: src}})
		if err != nil {
			t.Fatal(err)
		}
		goodRef := *l.Head().Archive
		goodObj := objectBytes(t, s, good.Object)
		other, _ := s.Acquire(ctx, "other")
		otherPub, err := s.Publish(ctx, other, []Source{{Name: "home", Path: src}})
		if err != nil {
			t.Fatal(err)
		}
		var plainTar bytes.Buffer
		if _, err := writeArchive(ctx, &plainTar, []Source{{Name: "home", Path: src}}, DefaultLimits(), t.TempDir()); err != nil {
			t.Fatal(err)
		}
		hdrLen := 12 + int(binary.BigEndian.Uint32(goodObj[8:12]))
		const seg = 4096 // AES256_GCM_HKDF_4KB: every ciphertext segment, the first with tink's header
		bad := map[string]func(gen int64) ([]byte, int64){
			"truncated": func(gen int64) ([]byte, int64) {
				return append([]byte(nil), goodObj[:len(goodObj)-100]...), goodRef.Generation
			},
			"truncated-at-segment": func(gen int64) ([]byte, int64) {
				return append([]byte(nil), goodObj[:hdrLen+3*seg]...), goodRef.Generation
			},
			"swapped-segments": func(gen int64) ([]byte, int64) {
				b := append([]byte(nil), goodObj...)
				s1, s2 := b[hdrLen+seg:hdrLen+2*seg], b[hdrLen+2*seg:hdrLen+3*seg]
				tmp := append([]byte(nil), s1...)
				copy(s1, s2)
				copy(s2, tmp)
				return b, goodRef.Generation
			},
			"flipped-byte": func(gen int64) ([]byte, int64) {
				b := append([]byte(nil), goodObj...)
				b[len(b)/2] ^= 1
				return b, goodRef.Generation
			},
			"flipped-first-segment": func(gen int64) ([]byte, int64) {
				b := append([]byte(nil), goodObj...)
				b[hdrLen+seg/2] ^= 1 // tink then says "no matching key"
				return b, goodRef.Generation
			},
			"other-session-key": func(gen int64) ([]byte, int64) {
				return sealObject(t, s.key, "other", gen, plainTar.Bytes()), gen
			},
			"other-generation": func(gen int64) ([]byte, int64) {
				return sealObject(t, s.key, "k", gen+7, plainTar.Bytes()), gen
			},
			"other-master-key": func(gen int64) ([]byte, int64) {
				return sealObject(t, testKey(t), "k", gen, plainTar.Bytes()), gen
			},
			"copied-from-other-key": func(gen int64) ([]byte, int64) {
				return objectBytes(t, s, otherPub.Object), otherPub.Generation
			},
		}
		for _, name := range sortedKeys(bad) {
			t.Run(name, func(t *testing.T) {
				gen := l.Head().Generation + 1
				obj, g := bad[name](gen)
				ref := plant(t, s, l, g, obj)
				setHead(t, s, l, &ref, &goodRef)
				target := filepath.Join(t.TempDir(), "home")
				r, err := s.Restore(ctx, l, map[string]string{"home": target}, t.TempDir())
				if err != nil {
					t.Fatalf("Restore with a good previous: %v", err)
				}
				if r.Generation != goodRef.Generation {
					t.Fatalf("restored generation %d, want the previous %d", r.Generation, goodRef.Generation)
				}
				sameTree(t, src, target)
				// both bad
				setHead(t, s, l, &ref, &ref)
				env, scratch := t.TempDir(), t.TempDir()
				_, err = s.Restore(ctx, l, map[string]string{"home": filepath.Join(env, "home")}, scratch)
				if strings.HasPrefix(name, "flipped") && (err == nil || !strings.Contains(err.Error(), "failed authentication (damaged")) {
					t.Errorf("Restore of a damaged archive: %v, want it called damaged, not a key problem", err)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Restore with both bad: %v, want ErrCorrupt", err)
				}
				if n := append(listDir(t, env), listDir(t, scratch)...); len(n) != 0 {
					t.Fatalf("left %v", n)
				}
			})
		}
		_ = context.Background
	})
}
