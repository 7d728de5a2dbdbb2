//go:build linux

package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tree, for the namespace tests: the test binary re-executed with
// childEnv set. Stage "join" (the namespace's descriptor is its fd 3)
// joins the namespace on its locked main thread and execve's — the new
// image runs wholly inside it — either argv from childExec or itself in
// stage "ops", which runs the ops of childOps (one per line) and prints
// one JSON result line for each.

const (
	childEnv  = "ACPX_EGRESS_TEST_CHILD"
	childExec = "ACPX_EGRESS_TEST_EXEC" // JSON argv to run in the namespace
	childOps  = "ACPX_EGRESS_TEST_OPS"
)

// opResult is one op's outcome as the child prints it.
type opResult struct {
	Op    string   `json:"op"`
	OK    bool     `json:"ok"`
	Err   string   `json:"err,omitempty"`
	Addrs []string `json:"addrs,omitempty"`
	Body  int      `json:"body,omitempty"`
	Ms    int64    `json:"ms"`
}

// childMain runs a child stage; it never returns.
func childMain(stage string) {
	switch stage {
	case "join":
		runtime.LockOSThread()
		if err := unix.Setns(3, unix.CLONE_NEWNET); err != nil {
			fmt.Fprintln(os.Stderr, "setns:", err)
			os.Exit(3)
		}
		argv := []string{os.Args[0], "-test.run=^$"}
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, childEnv+"=") })
		env = append(env, childEnv+"=ops")
		if raw := os.Getenv(childExec); raw != "" {
			_ = json.Unmarshal([]byte(raw), &argv)
			if p, err := exec.LookPath(argv[0]); err == nil {
				argv[0] = p
			}
		}
		err := syscall.Exec(argv[0], argv, env)
		fmt.Fprintln(os.Stderr, "exec:", err)
		os.Exit(3)
	case "ops":
		enc := json.NewEncoder(os.Stdout)
		for _, op := range strings.Split(os.Getenv(childOps), "\n") {
			if op != "" {
				_ = enc.Encode(runOp(op))
			}
		}
		os.Exit(0)
	}
	os.Exit(3)
}

// runOp runs "resolve NAME", "get URL", "dial HOST:PORT" or "udp
// HOST:PORT" and reports how it went.
func runOp(op string) opResult {
	verb, arg, _ := strings.Cut(op, " ")
	r := opResult{Op: op}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var err error
	switch verb {
	case "resolve":
		var addrs []string
		addrs, err = net.DefaultResolver.LookupHost(ctx, arg)
		r.Addrs = addrs
	case "get":
		tr := &http.Transport{DisableKeepAlives: true}
		var resp *http.Response
		if resp, err = (&http.Client{Transport: tr, Timeout: 8 * time.Second}).Get(arg); err == nil {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			r.Body = len(b)
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
	case "dial":
		var c net.Conn
		if c, err = (&net.Dialer{}).DialContext(ctx, "tcp", arg); err == nil {
			c.Close()
		}
	case "udp":
		var c net.Conn
		if c, err = net.Dial("udp", arg); err == nil {
			_, _ = c.Write([]byte("x"))
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Read(make([]byte, 16))
			c.Close()
		}
	default:
		err = errors.New("unknown op")
	}
	r.Ms = time.Since(start).Milliseconds()
	r.OK = err == nil
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// inTree runs ops (or argv, when set) in n's namespace and returns the
// child's results (or its output).
func inTree(t *testing.T, n *Network, argv []string, ops ...string) ([]opResult, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dup, err := unix.FcntlInt(uintptr(n.NetNSFD()), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		t.Fatal(err)
	}
	ns := os.NewFile(uintptr(dup), "netns")
	defer ns.Close()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=join", childOps+"="+strings.Join(ops, "\n"))
	if argv != nil {
		raw, _ := json.Marshal(argv)
		cmd.Env = append(cmd.Env, childExec+"="+string(raw))
	}
	cmd.ExtraFiles = []*os.File{ns}
	out, err := cmd.Output()
	if argv != nil {
		if err != nil {
			return nil, "error: " + err.Error() + ": " + string(out)
		}
		return nil, string(out)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("child: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("child: %v", err)
	}
	var res []opResult
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var r opResult
		if err := dec.Decode(&r); err != nil {
			break
		}
		res = append(res, r)
	}
	if len(res) != len(ops) {
		t.Fatalf("child printed %d results for %d ops: %s", len(res), len(ops), out)
	}
	return res, ""
}
