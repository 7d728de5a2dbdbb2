package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func (d *demo) shutdown() error {
	var res struct {
		Proofs []proof `json:"proofs"`
	}
	d.out.line("-> shutdown")
	if err := d.rpc.call("shutdown", map[string]any{}, &res); err != nil {
		return err
	}
	var closed proof
	_ = json.Unmarshal(d.proof, &closed)
	d.out.line("<- %d proof(s)", len(res.Proofs))
	for _, p := range res.Proofs {
		note := ""
		if p.CleanupID == closed.CleanupID {
			note = " (the proof of step 7: our session was already closed)"
		}
		d.out.line("   %s complete=%v%s", p.CleanupID, p.Complete, note)
		if !p.Complete {
			return fmt.Errorf("shutdown proof %s is not complete", p.CleanupID)
		}
	}
	d.out.line("-> exit (notification)")
	if err := d.rpc.notify("exit", nil); err != nil {
		return err
	}
	werr, ok := d.waitSidecar(stepTimeout)
	if !ok {
		return fmt.Errorf("TIMEOUT: the sidecar did not exit within %v of exit", stepTimeout)
	}
	if werr != nil {
		return fmt.Errorf("sidecar exited with %v, want status 0", werr)
	}
	d.out.line("sidecar exited with status 0")
	return nil
}

// waitSidecar waits up to limit for the sidecar to exit; ok is false on
// timeout. Calling it again after an exit returns the same result.
func (d *demo) waitSidecar(limit time.Duration) (err error, ok bool) {
	if d.sidecarExit != nil {
		return *d.sidecarExit, true
	}
	select {
	case err = <-d.sidecarDone:
		d.sidecarExit = &err
		return err, true
	case <-time.After(limit):
		return nil, false
	}
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
	if d.sidecar != nil {
		if _, ok := d.waitSidecar(0); !ok {
			// Closing stdin is the same as shutdown then exit (docs/protocol.md
			// §4 Lifecycle, item 5).
			d.out.line("closing the sidecar's stdin (it shuts down on EOF)")
			_ = d.sidecarStdin.Close()
			if werr, ok := d.waitSidecar(30 * time.Second); ok {
				d.out.line("sidecar exited: %v", exitText(werr))
			} else {
				d.out.line("WARNING: sidecar still running after 30s; killing it (its agents may survive)")
				_ = d.sidecar.Process.Kill()
				d.waitSidecar(5 * time.Second)
			}
		}
	}
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
		var buf bytes.Buffer
		if json.Compact(&buf, d.proof) == nil {
			d.out.line("")
			d.out.line("the cleanup proof as JSON:")
			d.out.line("%s", buf.String())
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
