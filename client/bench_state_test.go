package client_test

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/benchtree"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore/s3test"
)

// BenchmarkSidecarStateMove: the sidecar itself moves a session's
// provider state through versitygw on loopback (docs/protocol.md §24): a
// session of the fault agent whose stateDirs name the benchmark's tree
// (benchtree: the seed's 2.87 GB, 89,100 entries under
// ACPX_STATE_BENCH_FULL=1) is closed on one sidecar — its publication,
// read-back included, is the proof's publication.ms — and the key opened
// on a second sidecar with another state dir and target — the restore is
// the open result's restore.ms. Reported: both times and each sidecar's
// peak RSS (VmHWM of the whole process, the runtime and everything else
// included). Goals (issue 29): publish ≤ 20 s, restore ≤ 20 s, the
// sidecar's peak RSS ≤ 64 MiB.
func BenchmarkSidecarStateMove(b *testing.B) {
	bin, skip, err := s3test.Binary()
	if err != nil {
		b.Fatal(err)
	}
	if skip != "" {
		b.Skip(skip)
	}
	tree, shape, made, err := benchtree.Cached()
	if err != nil {
		b.Fatal(err)
	}
	if made > 0 {
		b.Logf("generated %d bytes in %d entries in %v", shape.Bytes, shape.Entries, made)
	}
	for range b.N {
		srv, err := s3test.Start(bin)
		if err != nil {
			b.Fatal(err)
		}
		restoreEnv := srv.Env() // the sidecars read the server's credentials from their environment
		key := filepath.Join(b.TempDir(), "k")
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		if err := os.WriteFile(key, k, 0o600); err != nil {
			b.Fatal(err)
		}
		flags := []string{"--state-store", srv.URL("bench"), "--state-key-file", key, "--state-max-bytes", "8589934592"}
		cwd := b.TempDir()
		open := func(s *rawSidecar, dir string) json.RawMessage {
			res, err := s.call("session/open", map[string]any{"sessionKey": "bench", "agent": "generic", "cwd": cwd,
				"command":        map[string]any{"path": faultagentBin},
				"permissionMode": "approve-reads", "nonInteractivePermissions": "deny", "stateDirs": map[string]string{"bench": dir}})
			if err != nil {
				b.Fatal(err)
			}
			return res
		}
		a := startRawArgs(b, flags...)
		var o struct {
			Session string `json:"session"`
		}
		_ = json.Unmarshal(open(a, tree), &o)
		res, err := a.call("session/close", map[string]any{"session": o.Session})
		if err != nil {
			b.Fatal(err)
		}
		var c struct {
			Proof struct {
				Publication struct {
					State   string `json:"state"`
					Ms      int64  `json:"ms"`
					Bytes   int64  `json:"bytes"`
					Entries int64  `json:"entries"`
				} `json:"publication"`
			} `json:"proof"`
		}
		_ = json.Unmarshal(res, &c)
		pub := c.Proof.Publication
		if pub.State != "published" || pub.Entries < int64(shape.Entries) { // and the record, journal
			b.Fatalf("publication %+v, want published with at least %d entries", pub, shape.Entries)
		}
		hwmA := vmHWM(strconv.Itoa(a.cmd.Process.Pid))
		a.close()

		bside := startRawArgs(b, flags...)
		var r struct {
			Restore *struct {
				Ms      int64 `json:"ms"`
				Entries int64 `json:"entries"`
			} `json:"restore"`
		}
		_ = json.Unmarshal(open(bside, filepath.Join(b.TempDir(), "restored")), &r)
		if r.Restore == nil || r.Restore.Entries < int64(shape.Entries) {
			b.Fatalf("restore %+v, want at least %d entries", r.Restore, shape.Entries)
		}
		hwmB := vmHWM(strconv.Itoa(bside.cmd.Process.Pid))
		bside.close()
		restoreEnv()
		_ = srv.Stop()
		mib := func(kb int) float64 { return float64(kb) / 1024 }
		b.ReportMetric(float64(pub.Ms)/1000, "publish-s")
		b.ReportMetric(float64(r.Restore.Ms)/1000, "restore-s")
		b.ReportMetric(mib(max(hwmA, hwmB)), "sidecar-peak-rss-MiB")
		b.Logf("%d bytes in %d entries through versitygw (load %s): the closing sidecar published %d bytes in %.1f s (peak RSS %.1f MiB), the opening one restored in %.1f s (peak RSS %.1f MiB)",
			shape.Bytes, shape.Entries, loadAvg(), pub.Bytes, float64(pub.Ms)/1000, mib(hwmA), float64(r.Restore.Ms)/1000, mib(hwmB))
	}
}

// vmHWM is /proc/<pid>/status VmHWM (peak RSS) in kB.
func vmHWM(pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}
