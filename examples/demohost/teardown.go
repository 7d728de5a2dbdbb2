package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

func (d *demo) shutdown() error {
	d.out.line("-> shutdown")
	ctx, cancel := stepContext()
	defer cancel()
	// Shutdown sends shutdown, then exit, and waits for the sidecar to end:
	// an error with proofs means the exit status was not 0.
	proofs, err := d.c.Shutdown(ctx)
	d.closeLog() // the sidecar has exited: its log is whole
	if err != nil && proofs == nil {
		return err // the shutdown request itself failed
	}
	d.out.line("<- %d proof(s)", len(proofs))
	var incomplete error
	for _, p := range proofs {
		note := ""
		if d.proof != nil && p.CleanupID == d.proof.CleanupID {
			note = " (the proof of step 7: our session was already closed)"
		}
		d.out.line("   %s complete=%v%s", p.CleanupID, p.Complete, note)
		if !p.Complete && incomplete == nil {
			incomplete = fmt.Errorf("shutdown proof %s is not complete", p.CleanupID)
		}
	}
	d.out.line("-> exit (notification)")
	if err != nil {
		return err
	}
	if incomplete != nil {
		return incomplete
	}
	d.out.line("sidecar exited with status 0")
	return nil
}

// checkNoLeftovers scans /proc for a live process carrying our marker in
// its environment: the provider tree (which the sidecar launched with our
// env) and the sidecar itself must all be gone; only the model stub may
// still run. Zombies are skipped: PID 1 here never reaps them.
func (d *demo) checkNoLeftovers() error {
	left := markedProcesses([]byte(d.markEnv()), d.stub.Process.Pid)
	if len(left) > 0 {
		return fmt.Errorf("processes still alive with our marker: %v", left)
	}
	d.out.line("no live process carries our env marker (model stub aside)")
	b, err := os.ReadFile(d.sidecarLog)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(`"session opened"`)) || !bytes.Contains(b, []byte(`"session ended"`)) {
		// A log cut short would pass the check below and prove nothing.
		return errors.New("the sidecar log lacks the session's opened and ended lines: it is not the whole log")
	}
	if bytes.Contains(b, []byte(d.apiKey)) {
		return errors.New("the sidecar log contains the API key")
	}
	d.out.line("the sidecar log (%d bytes) does not contain the API key", len(b))
	return nil
}

// markedProcesses lists the pids (other than except) whose environment
// holds mark and whose state is not Z.
func markedProcesses(mark []byte, except int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == except || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// state is the field after the ")" that closes the command name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// cleanup stops whatever is still running and removes the temp dir. It
// runs after success and after failure.
func (d *demo) cleanup() {
	d.out.header("10. clean up")
	if d.c != nil {
		select {
		case <-d.c.Done(): // it exited (after shutdown, or on its own)
		default:
			// Closing stdin is the same as shutdown then exit (docs/protocol.md
			// §4 Lifecycle, item 5); past the deadline Close kills it.
			d.out.line("closing the sidecar's stdin (it shuts down on EOF)")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := d.c.Close(ctx)
			cancel()
			var cerr *client.Error
			if errors.As(err, &cerr) && cerr.DataCode == client.DataCodeCancelled {
				d.out.line("WARNING: sidecar still running after 30s; killed it (its agents may survive)")
			} else {
				d.out.line("sidecar exited: status %d", d.c.ExitCode())
			}
		}
	}
	d.closeLog()
	if d.stub != nil {
		_ = d.stubStdin.Close() // the stub exits on stdin EOF
		select {
		case err := <-d.stubDone:
			d.out.line("model stub stopped: %s", exitText(err))
		case <-time.After(10 * time.Second):
			_ = d.stub.Process.Signal(syscall.SIGTERM)
			d.out.line("model stub did not stop on EOF; sent SIGTERM: %s", exitText(<-d.stubDone))
		}
	}
	if d.tmp != "" {
		if err := os.RemoveAll(d.tmp); err != nil {
			d.out.line("WARNING: could not remove %s: %v", d.tmp, err)
		} else {
			d.out.line("removed %s", d.tmp)
		}
	}
	if d.proof != nil {
		if b, err := json.Marshal(d.proof); err == nil {
			d.out.line("")
			d.out.line("the cleanup proof as JSON:")
			d.out.line("%s", b)
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// showLogTail prints the last lines of a log file, scrubbed of the key.
func (d *demo) showLogTail(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	d.out.line("last lines of the %s:", name)
	for _, l := range lines {
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		d.out.line("  %s", l)
	}
}

// closeLog closes the sidecar's log file once the sidecar has exited (or
// the demo gives up on it); closing it earlier would drop every line the
// client copies after that.
func (d *demo) closeLog() {
	if d.logFile != nil {
		_ = d.logFile.Close()
		d.logFile = nil
	}
}
