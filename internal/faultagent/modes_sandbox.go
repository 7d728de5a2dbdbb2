package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxModes are the sandbox probe modes (docs/protocol.md §19):
//
//	probe              each turn runs every line of its prompt text as a
//	                   probe and reports one agent_message_chunk
//	                   "probe <line> => <result>" per line, where result is
//	                   "ok", "ok <detail>" or the errno name (EACCES, EPERM,
//	                   EROFS, ECONNREFUSED, ...). Probes:
//	                     write <path>      open O_WRONLY|O_CREAT, write the pid
//	                     read <path>       read the file
//	                     replace <path>    write <path>.new, rename it over <path>
//	                     kill <pid>        kill(pid, 0)
//	                     abstract <name>   connect to the abstract UNIX socket @name
//	                     tcp <host:port>   TCP connect (2 s)
//	                     procfd <pid>      open /proc/<pid>/fd/1 for writing (the
//	                                       process's stdout), then close it
//	                     cgroup-escape     write the pid into the cgroup.procs of
//	                                       the agent's own cgroup2 cgroup
//	                     exec <prog> <args...>  run it; "ok <first line>" or "exit <n>"
//	                     child <probe>     run <probe> in a setsid'd re-execution
//	                                       of this binary (a descendant outside the
//	                                       provider's session) and report its result
//	                     and the root probes of modes_root_linux.go (reboot,
//	                     init_module, clock_settime, mount, unshare-user,
//	                     clone3-user, raw-socket, ptrace-child, chown,
//	                     syscall, caps, proc, ps)
//	                     and the network probes of modes_net.go (http,
//	                     resolve, flood, udp)
type sandboxModes struct {
	probe bool
}

// probeChildFlag is the hidden flag of a "child" probe's re-execution:
// os.Args[2] is the probe line; it prints the result and exits.
const probeChildFlag = "--faultagent-probe"

// runProbes runs each non-empty line of text as a probe.
func runProbes(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		out = append(out, "probe "+line+" => "+probe(line))
	}
	return out
}

// probeChildMain is the body of a "child" probe's re-execution.
func probeChildMain(line string) {
	fmt.Print(probe(line))
	os.Exit(0)
}

// probe runs one probe line and returns its result.
func probe(line string) string {
	verb, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch verb {
	case "write":
		return result(writePid(arg))
	case "read":
		_, err := os.ReadFile(arg)
		return result(err)
	case "replace":
		if err := writePid(arg + ".new"); err != nil {
			return result(err)
		}
		return result(os.Rename(arg+".new", arg))
	case "kill":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return "bad pid"
		}
		return result(syscall.Kill(pid, 0))
	case "abstract":
		c, err := net.DialTimeout("unix", "@"+arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return result(err)
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return result(err)
	case "procfd":
		f, err := os.OpenFile("/proc/"+arg+"/fd/1", os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return result(err)
	case "cgroup-escape":
		p, err := ownCgroupProcs()
		if err != nil {
			return "no cgroup2: " + err.Error()
		}
		return result(writePid(p))
	case "exec":
		f := strings.Fields(arg)
		if len(f) == 0 {
			return "no program"
		}
		out, err := exec.Command(f[0], f[1:]...).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "exit " + strconv.Itoa(ee.ExitCode())
		}
		if err != nil {
			return result(err)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return "ok " + first
	case "child":
		self, err := os.Executable()
		if err != nil {
			return result(err)
		}
		cmd := exec.Command(self, probeChildFlag, arg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := cmd.Output()
		if err != nil {
			return "child: " + result(err)
		}
		return strings.TrimSpace(string(out))
	}
	if r, ok := rootProbe(verb, arg); ok {
		return r
	}
	if r, ok := netProbe(verb, arg); ok { // modes_net.go
		return r
	}
	return "unknown probe"
}

// writePid opens path O_WRONLY|O_CREAT (0644) and writes this pid.
func writePid(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// result is "ok" or the errno name of err (its text if it has none).
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// ownCgroupProcs is the cgroup.procs of this process's cgroup2 cgroup:
// the first cgroup2 mount of /proc/self/mountinfo plus the "0::" path of
// /proc/self/cgroup.
func ownCgroupProcs() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	for _, l := range strings.Split(string(b), "\n") {
		if r, ok := strings.CutPrefix(l, "0::"); ok {
			rel = r
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && strings.HasPrefix(post, "cgroup2 ") && len(fields) >= 5 {
			return fields[4] + rel + "/cgroup.procs", nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}
