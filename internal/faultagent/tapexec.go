package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// tapExecFlag makes the fault agent a recording pipe in front of another
// agent: `faultagent __tap-exec <record file> <command> [args…]` runs the
// command with this process's environment and stdio, and records every
// line that passes in either direction in the record file, in the format
// of mode record= ("recv": what the client sent the agent, "sent": what
// the agent wrote), so a test can check the frames a real agent got
// (internal/e2e acpCheckedAgent). It exits with the command's status.
const tapExecFlag = "__tap-exec"

// tapExecMain is the __tap-exec entry; args are the record file and the
// command line.
func tapExecMain(args []string) {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "faultagent: __tap-exec <record file> <command> [args…]")
		os.Exit(2)
	}
	rec, err := openRecorder(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultagent: %v\n", err)
		os.Exit(2)
	}
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.Exit(2)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.Exit(2)
	}
	// SIGTERM and SIGINT go on to the agent; the tree's own kill reaches
	// it anyway.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "faultagent: %v\n", err)
		os.Exit(127)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	go func() {
		copyLines(os.Stdin, in, func(l []byte) { rec.msg("recv", l) })
		_ = in.Close() // the client's EOF is the agent's
	}()
	copyLines(out, os.Stdout, func(l []byte) { rec.msg("sent", l) })
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		os.Exit(ee.ExitCode())
	default:
		os.Exit(1)
	}
}

// copyLines copies r to w line by line (readLines), showing each complete
// JSON line to note first (a line that is not one JSON object is copied,
// not noted). It stops at the end of r or the first failed write.
func copyLines(r io.Reader, w io.Writer, note func([]byte)) {
	var werr error
	_ = readLines(r, func(line []byte) {
		if werr != nil {
			return
		}
		if body := bytes.TrimRight(line, "\r\n"); len(body) > 0 && body[0] == '{' {
			note(body)
		}
		_, werr = w.Write(line)
	})
}
