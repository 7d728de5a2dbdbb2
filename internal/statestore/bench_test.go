package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/benchtree"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The publish/restore benchmark (make bench): a generated tree is
// published to versitygw on loopback (read-back included) and restored
// into a fresh directory, each in a child process (this test binary
// re-executed with ACPX_STATE_BENCH_CHILD) whose peak RSS (ru_maxrss) is
// the memory figure. The floor is measured in the same run on the same
// tree: `tar -C tree -cf - . | zstd -1 -q -o FILE` with FILE in the S3
// server's directory, and `zstd -dc FILE | tar -xf - -C DIR`.
//
// Shape: ACPX_STATE_BENCH_FULL=1 is the seed's figure (docs/architecture.md
// "Lifecycle and portable state"): 2,870,101,591 bytes in 89,100 entries;
// otherwise 64 MiB in 3,000 entries. Half the bytes are compressible text,
// half random. The tree is generated once into ACPX_STATE_BENCH_CACHE
// (default $TMPDIR/acpx-state-bench) and reused; remove it when done.
// Knobs: ACPX_STATE_BENCH_PART_MIB and ACPX_STATE_BENCH_CONCURRENCY set
// Options.PartSize and Concurrency; ACPX_STATE_BENCH_STORE=file publishes
// to a file:// store in the server's directory instead;
// ACPX_STATE_BENCH_CPUPROFILE=PATH writes PATH.publish and PATH.restore.
// Every timed step starts after a sync(2), so none pays for the last
// one's dirty pages.
// Goals: publish ≤ 20 s, restore ≤ 20 s, peak RSS ≤ 64 MiB, each ≤ 1.5×
// its floor.

const envBenchChild = "ACPX_STATE_BENCH_CHILD"

// childJob is what the parent asks a child to do.
type childJob struct {
	Op      string `json:"op"` // "publish" | "restore"
	URL     string `json:"url"`
	KeyFile string `json:"keyFile"`
	Tree    string `json:"tree"`
	Target  string `json:"target"`
	Scratch string `json:"scratch"`
}

type childResult struct {
	Ms      int64  `json:"ms"`
	Bytes   int64  `json:"bytes"`
	Entries int64  `json:"entries"`
	Err     string `json:"err,omitempty"`
}

// runChild runs a benchmark child's job when ACPX_STATE_BENCH_CHILD holds
// one, prints its result as JSON and exits; otherwise it returns false.
func runChild() bool {
	spec := os.Getenv(envBenchChild)
	if spec == "" {
		return false
	}
	var job childJob
	res := childResult{}
	err := json.Unmarshal([]byte(spec), &job)
	if err == nil {
		res, err = job.run()
	}
	if err != nil {
		res.Err = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	if os.Getenv("ACPX_STATE_BENCH_MEMSTATS") != "" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "memstats: HeapInuse %d MiB, HeapSys %d MiB, StackSys %d MiB, Sys %d MiB, NumGC %d, NextGC %d MiB\n",
			ms.HeapInuse>>20, ms.HeapSys>>20, ms.StackSys>>20, ms.Sys>>20, ms.NumGC, ms.NextGC>>20)
	}
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func (j childJob) run() (childResult, error) {
	ctx := context.Background()
	key, err := LoadKeyFile(j.KeyFile)
	if err != nil {
		return childResult{}, err
	}
	o := Options{URL: j.URL, Key: key, Owner: Owner{SidecarID: "bench-" + j.Op, Hostname: "bench"}, ScratchDir: j.Scratch}
	if v, err := strconv.Atoi(os.Getenv("ACPX_STATE_BENCH_PART_MIB")); err == nil {
		o.PartSize = int64(v) << 20
	}
	if v, err := strconv.Atoi(os.Getenv("ACPX_STATE_BENCH_CONCURRENCY")); err == nil {
		o.Concurrency = v
	}
	s, err := Open(ctx, o)
	if err != nil {
		return childResult{}, err
	}
	if p := os.Getenv("ACPX_STATE_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p + "." + j.Op)
		if err != nil {
			return childResult{}, err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	l, err := s.Acquire(ctx, "bench")
	if err != nil {
		return childResult{}, err
	}
	switch j.Op {
	case "publish":
		p, err := s.Publish(ctx, l, []Source{{Name: "home", Path: j.Tree}})
		if err != nil {
			return childResult{}, err
		}
		return childResult{Ms: time.Since(start).Milliseconds(), Bytes: p.Bytes, Entries: p.Entries}, nil
	case "restore":
		r, err := s.Restore(ctx, l, map[string]string{"home": j.Target}, j.Scratch)
		if err != nil {
			return childResult{}, err
		}
		return childResult{Ms: time.Since(start).Milliseconds(), Bytes: r.Bytes, Entries: r.Entries}, nil
	}
	return childResult{}, fmt.Errorf("unknown op %q", j.Op)
}

// benchTree is the benchmark's tree (benchtree.Cached: the seed's figure
// under ACPX_STATE_BENCH_FULL=1, else a small one).
func benchTree(b *testing.B) (string, benchtree.Shape) {
	tree, shape, made, err := benchtree.Cached()
	if err != nil {
		b.Fatal(err)
	}
	if made > 0 {
		b.Logf("generated %d bytes in %d entries under %s in %v", shape.Bytes, shape.Entries, tree, made)
	}
	return tree, shape
}

// runBenchChild runs one job in a child process and returns its result
// and peak RSS in MiB.
func runBenchChild(b *testing.B, job childJob) (childResult, float64) {
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBenchChild+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var res childResult
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || res.Err != "" {
		b.Fatalf("child %s: %v %v %s: %s", job.Op, err, jerr, res.Err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	b.Logf("%s: %.2f s wall, %.2f s user, %.2f s system, %.1f MiB peak RSS", job.Op, float64(res.Ms)/1000,
		cmd.ProcessState.UserTime().Seconds(), cmd.ProcessState.SystemTime().Seconds(), maxRSSMiB(ru))
	return res, maxRSSMiB(ru)
}

// timeShell runs a bash pipeline and returns its wall time in seconds.
func timeShell(b *testing.B, script string) float64 {
	start := time.Now()
	out, err := exec.Command("bash", "-c", "set -euo pipefail; "+script).CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v: %s", script, err, out)
	}
	return time.Since(start).Seconds()
}

// BenchmarkStatePublishRestore reports publish-s and restore-s (child
// wall time, Acquire included), their floors floor-publish-s and
// floor-restore-s, peak-rss-MiB (the larger child's ru_maxrss),
// object-MiB and entries.
func BenchmarkStatePublishRestore(b *testing.B) {
	if s3srv == nil {
		b.Skip(s3skip)
	}
	_, zerr := exec.LookPath("zstd")
	tree, shape := benchTree(b)
	work := b.TempDir()
	keyFile := filepath.Join(work, "key")
	k := testKey(b)
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(k.bytes())+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	floorFile := filepath.Join(s3srv.Dir(), "floor.tar.zst")
	defer os.Remove(floorFile)
	var pub, res, fpub, fres, rss, objMiB float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		url := s3srv.URL("bench" + randomHex(4))
		if os.Getenv("ACPX_STATE_BENCH_STORE") == "file" {
			url = "file://" + filepath.Join(s3srv.Dir(), "filebench"+randomHex(4))
		}
		// Nothing is deleted until the run is over: ext4 skips recently
		// freed inodes when allocating (recently_deleted, for 60-300 s), so
		// a restore right after removing a big tree pays several times the
		// system time (measured: 59 s vs 9 s of it for 89,100 files).
		target := filepath.Join(work, fmt.Sprintf("restored-%d", i))
		scratch := filepath.Join(work, fmt.Sprintf("scratch-%d", i))
		floorDir := filepath.Join(work, fmt.Sprintf("floor-%d", i))
		os.Mkdir(scratch, 0o700)
		syscall.Sync() // every timed step starts with no dirty pages of the last
		if zerr == nil {
			fpub = timeShell(b, fmt.Sprintf("tar -C %q -cf - . | zstd -1 -q -f -o %q", tree, floorFile))
		}
		syscall.Sync()
		b.StartTimer()
		pr, prss := runBenchChild(b, childJob{Op: "publish", URL: url, KeyFile: keyFile, Tree: tree, Scratch: scratch})
		b.StopTimer()
		// the floor's restore runs before and after ours (into fresh
		// directories) and counts as their mean, so that neither side is
		// favoured by what the file system did just before
		var fres1 float64
		if zerr == nil {
			os.Mkdir(floorDir+"a", 0o700)
			syscall.Sync()
			fres1 = timeShell(b, fmt.Sprintf("zstd -dc %q | tar -xf - -C %q", floorFile, floorDir+"a"))
		}
		syscall.Sync()
		b.StartTimer()
		rr, rrss := runBenchChild(b, childJob{Op: "restore", URL: url, KeyFile: keyFile, Target: target, Scratch: scratch})
		b.StopTimer()
		if rr.Entries != int64(shape.Entries) || pr.Entries != int64(shape.Entries) {
			b.Fatalf("entries: published %d, restored %d, want %d", pr.Entries, rr.Entries, shape.Entries)
		}
		if zerr == nil {
			os.Mkdir(floorDir+"b", 0o700)
			syscall.Sync()
			fres2 := timeShell(b, fmt.Sprintf("zstd -dc %q | tar -xf - -C %q", floorFile, floorDir+"b"))
			b.Logf("floor restore before ours %.2f s, after %.2f s", fres1, fres2)
			fres = (fres1 + fres2) / 2
		}
		pub, res = float64(pr.Ms)/1000, float64(rr.Ms)/1000
		rss = max(prss, rrss)
		b.Logf("peak RSS: publish %.1f MiB, restore %.1f MiB", prss, rrss)
		objMiB = float64(pr.Bytes) / (1 << 20)
		b.StartTimer()
	}
	b.ReportMetric(pub, "publish-s")
	b.ReportMetric(res, "restore-s")
	b.ReportMetric(rss, "peak-rss-MiB")
	b.ReportMetric(objMiB, "object-MiB")
	if zerr == nil {
		b.ReportMetric(fpub, "floor-publish-s")
		b.ReportMetric(fres, "floor-restore-s")
	} else {
		b.Logf("no zstd binary on PATH (Debian package zstd): floors not measured")
	}
}
