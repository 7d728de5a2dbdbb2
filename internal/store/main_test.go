package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// testMark is put in the environment of every process these tests start
// (ACPX_TEST_MARK); TestMain fails if any such process outlives the tests.
var testMark = testmark.New()

const childEnv = "STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
		if left := markedProcs(testMark); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "processes left running with our ACPX_TEST_MARK:", left)
			code = 1
		}
	}
	os.Exit(code)
}

// runChild is the body of a re-executed test binary: it performs
// STORE_TEST_N increments of LastSeq on record STORE_TEST_KEY in
// STORE_TEST_DIR through Update.
func runChild() int {
	s, err := Open(os.Getenv("STORE_TEST_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv("STORE_TEST_N"))
	key := os.Getenv("STORE_TEST_KEY")
	for i := 0; i < n; i++ {
		if err := s.Update(key, func(r *Record) error { r.LastSeq++; return nil }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	return 0
}

// markedProcs returns pids (not zombies) whose environment holds
// ACPX_TEST_MARK=mark.
func markedProcs(mark string) []int {
	want := []byte("ACPX_TEST_MARK=" + mark + "\x00")
	ents, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []int
	for _, e := range ents {
		env, err := os.ReadFile(e)
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(e)))
		if st, err := ReadProcStat(pid); err == nil && st.State == 'Z' {
			continue
		}
		out = append(out, pid)
	}
	return out
}

func markedEnv(extra ...string) []string {
	return append(append(os.Environ(), "ACPX_TEST_MARK="+testMark), extra...)
}
