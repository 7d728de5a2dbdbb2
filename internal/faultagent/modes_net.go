package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The network probes of the probe mode (modes_sandbox.go), for egress by
// name (docs/protocol.md §19.1):
//
//	http <url>                    GET with a 10 s bound: "ok <status> <bytes>"
//	                              or the errno name (ECONNREFUSED, ...)
//	resolve <name>                the system resolver: "ok <addr>,<addr>" or
//	                              NXDOMAIN
//	flood <host:port> <n> <ms>    n connections at once, each then read for
//	                              up to ms: "ok held=<h> reset=<r> failed=<f>
//	                              ms=<elapsed>" — held: still open after ms
//	                              (forwarded and waiting), reset: ended by
//	                              the other side, failed: never connected,
//	                              then failed-<why>=<n> per reason
//	                              ("timeout" or the errno name)
//	udp <host:port>               one datagram on a connected socket, then a
//	                              read for 2 s: the errno name
//
// Each returns ok false for a verb it does not know.
func netProbe(verb, arg string) (string, bool) {
	switch verb {
	case "http":
		return httpProbe(arg), true
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return "NXDOMAIN", true
		}
		if err != nil {
			return result(err), true
		}
		return "ok " + strings.Join(addrs, ","), true
	case "flood":
		return floodProbe(arg), true
	case "udp":
		c, err := net.Dial("udp", arg)
		if err != nil {
			return result(err), true
		}
		defer c.Close()
		_, _ = c.Write([]byte("probe"))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 64))
		return result(err), true
	}
	return "", false
}

func httpProbe(url string) string {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Get(url)
	if err != nil {
		return result(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return result(err)
	}
	return "ok " + strconv.Itoa(resp.StatusCode) + " " + strconv.FormatInt(n, 10)
}

// floodProbe opens n connections to addr at once (raising the descriptor
// limit to its hard limit first) and reads each until ms have passed since
// the start.
func floodProbe(arg string) string {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return "usage: flood <host:port> <n> <ms>"
	}
	n, err1 := strconv.Atoi(f[1])
	ms, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || n < 1 {
		return "usage: flood <host:port> <n> <ms>"
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	start := time.Now()
	until := start.Add(time.Duration(ms) * time.Millisecond)
	var held, reset, failed atomic.Int64
	var failedWhy sync.Map // error class -> *atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", f[0], time.Until(until))
			if err != nil {
				failed.Add(1)
				n, _ := failedWhy.LoadOrStore(floodFailure(err), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetReadDeadline(until)
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				held.Add(1)
			} else {
				reset.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	return "ok held=" + strconv.FormatInt(held.Load(), 10) + " reset=" + strconv.FormatInt(reset.Load(), 10) +
		" failed=" + strconv.FormatInt(failed.Load(), 10) + " ms=" + strconv.FormatInt(time.Since(start).Milliseconds(), 10) +
		floodFailures(&failedWhy)
}

// floodFailure names why a flood's connect failed: "timeout" or the errno
// name.
func floodFailure(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return result(err)
}

// floodFailures renders the failure counts by reason, sorted: "
// failed-ECONNREFUSED=3 failed-timeout=9" ("" for none).
func floodFailures(why *sync.Map) string {
	var parts []string
	why.Range(func(k, v any) bool {
		parts = append(parts, "failed-"+k.(string)+"="+strconv.FormatInt(v.(*atomic.Int64).Load(), 10))
		return true
	})
	sort.Strings(parts)
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}
