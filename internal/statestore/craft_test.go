package statestore

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// tarEntry is one entry of a crafted archive.
type tarEntry struct {
	typ  byte
	name string
	mode int64
	body string
	link string
}

// craftTar builds a tar of entries followed by a manifest: the true one
// for the entries (as writeArchive would write it) unless manifest is
// non-nil. noManifest leaves it out; extra entries follow it.
func craftTar(t testing.TB, entries []tarEntry, manifest *string, noManifest bool, extra ...tarEntry) []byte {
	t.Helper()
	var buf, man bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(e tarEntry) {
		h := &tar.Header{Typeflag: e.typ, Name: e.name, Mode: e.mode, Linkname: e.link, ModTime: time.Unix(1e9, 0)}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	for _, e := range entries {
		add(e)
		p := e.name
		switch e.typ {
		case tar.TypeDir:
			writeManLine(&man, manLine{T: "d", P: p[:len(p)-1], M: e.mode})
		case tar.TypeReg:
			s := sha256.Sum256([]byte(e.body))
			writeManLine(&man, manLine{T: "f", P: p, M: e.mode, S: int64(len(e.body)), H: hex.EncodeToString(s[:])})
		case tar.TypeSymlink:
			writeManLine(&man, manLine{T: "l", P: p, L: e.link})
		}
	}
	if manifest != nil {
		man.Reset()
		man.WriteString(*manifest)
	}
	if !noManifest {
		add(tarEntry{typ: tar.TypeReg, name: manifestName, mode: 0o600, body: man.String()})
	}
	for _, e := range extra {
		add(e)
	}
	tw.Close()
	return buf.Bytes()
}

// sealObject makes an archive object of the tar plain, sealed for
// sessionKey and generation under mk (the package's own sealing code).
func sealObject(t testing.TB, mk MasterKey, sessionKey string, gen int64, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := seal(&buf, mk, associatedData(sessionKey, gen))
	if err != nil {
		t.Fatal(err)
	}
	zw, err := zstd.NewWriter(w, encoderOptions...)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(plain)
	zw.Close()
	w.Close()
	return buf.Bytes()
}

// plant stores obj as a new archive of l's key, named for generation gen.
func plant(t testing.TB, s *Store, l *Lease, gen int64, obj []byte) ArchiveRef {
	t.Helper()
	name := fmt.Sprintf("%s/archives/%d-%s", l.dir, gen, randomHex(8))
	w, err := s.b.newObject(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(obj)
	sum := sha256.Sum256(obj)
	if err := w.commit(sum[:], int64(len(obj))); err != nil {
		t.Fatal(err)
	}
	return ArchiveRef{Object: name, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(obj)), Entries: 1, Generation: gen}
}

// setHead writes l's head with archive and previous (conditionally, as
// the lease's owner) and advances l.
func setHead(t testing.TB, s *Store, l *Lease, archive, previous *ArchiveRef) {
	t.Helper()
	h := l.Head()
	h.Generation++
	h.Archive, h.Previous = archive, previous
	data := s.encodeHead(h)
	etag, err := s.b.putHead(context.Background(), l.dir+"/head", data, l.etag)
	if err != nil {
		t.Fatal(err)
	}
	l.setHead(h)
	l.raw, l.etag = data, etag
}

// objectBytes reads a stored object whole (test objects are small).
func objectBytes(t testing.TB, s *Store, name string) []byte {
	t.Helper()
	r, err := s.b.getObject(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
