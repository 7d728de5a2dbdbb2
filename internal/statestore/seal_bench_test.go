package statestore

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"

	tinkpb "github.com/tink-crypto/tink-go/v2/proto/tink_go_proto"
	"github.com/tink-crypto/tink-go/v2/streamingaead"
)

// BenchmarkSeal compares the two segment sizes PROTOCOL §10.2's design
// allowed (AES256_GCM_HKDF_1MB and _4KB) sealing and opening 64 MiB:
// throughput (MB/s) and ciphertext overhead (overhead-ppm, parts per
// million of the plaintext). segmentTemplate is the 4 KiB one.
func BenchmarkSeal(b *testing.B) {
	plain := make([]byte, 64<<20)
	rand.Read(plain)
	key := testKey(b)
	ad := associatedData("bench", 1)
	for _, tc := range []struct {
		name string
		tmpl func() *tinkpb.KeyTemplate
	}{{"1MB", streamingaead.AES256GCMHKDF1MBKeyTemplate}, {"4KB", streamingaead.AES256GCMHKDF4KBKeyTemplate}} {
		b.Run(tc.name, func(b *testing.B) {
			old := segmentTemplate
			segmentTemplate = tc.tmpl
			defer func() { segmentTemplate = old }()
			var ct bytes.Buffer
			b.SetBytes(int64(len(plain)) * 2)
			for b.Loop() {
				ct.Reset()
				w, err := seal(&ct, key, ad)
				if err != nil {
					b.Fatal(err)
				}
				w.Write(plain)
				w.Close()
				r, err := unseal(newTrackReader(bytes.NewReader(ct.Bytes())), []MasterKey{key}, ad)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, r); err != nil || n != int64(len(plain)) {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(ct.Len()-len(plain))/float64(len(plain))*1e6, "overhead-ppm")
		})
	}
}
