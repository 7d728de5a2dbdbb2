// Package benchtree generates the provider-state tree of the state
// benchmarks (internal/statestore's BenchmarkStatePublishRestore and the
// sidecar-level one in client/): under ACPX_STATE_BENCH_FULL=1 the seed's
// figure, 2,870,101,591 bytes in 89,100 entries (docs/architecture.md
// "Lifecycle and portable state"); otherwise 64 MiB in 3,000 entries. Half
// the bytes are compressible text, half random; sizes are realistic (most
// files small, a few of megabytes). Benchmarks only.
package benchtree

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// Cached returns the tree of the shape the environment asks for,
// generating it once into ACPX_STATE_BENCH_CACHE (default
// $TMPDIR/acpx-state-bench) and reusing it after; made is how long the
// generation took (0 when reused). Remove the cache when done.
func Cached() (tree string, shape Shape, made time.Duration, err error) {
	shape = Shape{Bytes: 64<<20 + 12345, Entries: 3000}
	if os.Getenv("ACPX_STATE_BENCH_FULL") == "1" {
		shape = Shape{Bytes: 2870101591, Entries: 89100}
	}
	cache := os.Getenv("ACPX_STATE_BENCH_CACHE")
	if cache == "" {
		cache = filepath.Join(os.TempDir(), "acpx-state-bench")
	}
	dir := filepath.Join(cache, fmt.Sprintf("tree-%d-%d", shape.Bytes, shape.Entries))
	tree = filepath.Join(dir, "tree")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return tree, shape, 0, nil
	}
	os.RemoveAll(dir)
	start := time.Now()
	if err := Generate(tree, shape); err != nil {
		return "", shape, 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o600); err != nil {
		return "", shape, 0, err
	}
	return tree, shape, time.Since(start), nil
}

// Shape is a generated tree's size: total file bytes, and entries
// (the root, directories and files, as a publication counts them).
type Shape struct {
	// Bytes is the total size of the files' contents in bytes.
	Bytes int64
	// Entries counts the root, the directories and the files.
	Entries int
}

// Generate writes a deterministic tree: about 1/81 of the entries are
// directories (random parents, so depth varies), the rest files in random
// directories; sizes mostly small (80% under 8 KiB, 18% 8-64 KiB, 1.9%
// 64 KiB-1 MiB, 0.1% 1-16 MiB) scaled to the exact total; files
// alternate text (words of a 2,000-word vocabulary) and random bytes so
// that each kind holds half the bytes.
func Generate(root string, shape Shape) error {
	rng := rand.New(rand.NewPCG(1, 2))
	nDirs := shape.Entries / 81
	nFiles := shape.Entries - 1 - nDirs
	dirs := []string{root}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for i := range nDirs {
		p := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("d%04d", i))
		if err := os.Mkdir(p, []os.FileMode{0o755, 0o700}[i%2]); err != nil {
			return err
		}
		dirs = append(dirs, p)
	}
	sizes := make([]int64, nFiles)
	var sum int64
	for i := range sizes {
		switch r := rng.Float64(); {
		case r < 0.80:
			sizes[i] = rng.Int64N(8 << 10)
		case r < 0.98:
			sizes[i] = 8<<10 + rng.Int64N(56<<10)
		case r < 0.999:
			sizes[i] = 64<<10 + rng.Int64N(960<<10)
		default:
			sizes[i] = 1<<20 + rng.Int64N(15<<20)
		}
		sum += sizes[i]
	}
	var total int64
	biggest := 0
	for i := range sizes {
		sizes[i] = int64(float64(sizes[i]) * float64(shape.Bytes) / float64(sum))
		total += sizes[i]
		if sizes[i] > sizes[biggest] {
			biggest = i
		}
	}
	sizes[biggest] += shape.Bytes - total
	vocab := make([]string, 2000)
	for i := range vocab {
		w := make([]byte, 2+rng.IntN(9))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		vocab[i] = string(w)
	}
	chacha := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 256<<10)
	var textBytes, randBytes int64
	for i, size := range sizes {
		text := textBytes <= randBytes
		name := fmt.Sprintf("f%05d", i)
		if text {
			name += ".txt"
			textBytes += size
		} else {
			name += ".bin"
			randBytes += size
		}
		f, err := os.OpenFile(filepath.Join(dirs[rng.IntN(len(dirs))], name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, []os.FileMode{0o644, 0o600}[i%2])
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 64<<10)
		for left := size; left > 0; {
			if text {
				word := vocab[rng.IntN(len(vocab))]
				sep := " "
				if rng.IntN(12) == 0 {
					sep = "\n"
				}
				chunk := word + sep
				if int64(len(chunk)) > left {
					chunk = chunk[:left]
				}
				w.WriteString(chunk)
				left -= int64(len(chunk))
				continue
			}
			n := min(left, int64(len(buf)))
			chacha.Read(buf[:n])
			w.Write(buf[:n])
			left -= n
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
