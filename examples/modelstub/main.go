// Command modelstub serves the deterministic loopback model of package
// internal/modelstub so real coding agents run offline: one listener
// answers all four APIs the package serves, the OpenAI Responses API
// (codex-acp; docs/agents.md), the Anthropic Messages API (Claude Code),
// the Gemini API (Gemini CLI) and OpenAI chat completions (OpenCode), with
// the same reply rules and one `GET /stats`.
//
// It is test and demo infrastructure, not a product, so it lives under
// internal/. `make build` builds it into bin/modelstub because `make demo`
// (examples/demohost) runs it; by hand:
//
//	go build -o bin/modelstub ./examples/modelstub
//
// Usage:
//
//	modelstub [--addr 127.0.0.1:0] [--codex-home DIR [--codex-legacy]]
//
// Once listening it prints exactly one line to stdout,
// `{"addr":"127.0.0.1:PORT"}`, so a parent can read the port; logs go to
// stderr. With --codex-home it also writes DIR/config.toml pointing codex at
// itself before printing that line: the config of codex 2.x
// (@agentclientprotocol/codex-acp; agentenv.WriteCodexHome, docs/agents.md
// Codex), or with --codex-legacy the one of @zed-industries/codex-acp 0.16
// (modelstub.WriteCodexHome). The other agents take the address from their
// own base-URL settings (docs/agents.md). It exits 0 on SIGTERM, SIGINT or EOF on
// stdin (so it never outlives a parent that holds its stdin pipe), and 1 on
// a startup error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelstub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	codexHome := fs.String("codex-home", "", "if set, write `DIR`/config.toml pointing codex 2.x at this stub")
	codexLegacy := fs.Bool("codex-legacy", false, "with --codex-home: write the config of the legacy @zed-industries/codex-acp 0.16")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(stderr, "", log.LstdFlags|log.Lmicroseconds)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Printf("modelstub: listen: %v", err)
		return 1
	}
	bound := ln.Addr().String()
	if *codexHome != "" {
		write := agentenv.WriteCodexHome
		if *codexLegacy {
			write = modelstub.WriteCodexHome
		}
		if err := write(*codexHome, "http://"+bound); err != nil {
			logger.Printf("modelstub: %v", err)
			ln.Close()
			return 1
		}
	}
	line, _ := json.Marshal(map[string]string{"addr": bound})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		logger.Printf("modelstub: stdout: %v", err)
		ln.Close()
		return 1
	}
	logger.Printf("modelstub: listening on %s", bound)

	srv := &http.Server{Handler: modelstub.New(logger.Printf), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	stdinEOF := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(stdinEOF)
	}()

	code := 0
	select {
	case s := <-sigs:
		logger.Printf("modelstub: %v, exiting", s)
	case <-stdinEOF:
		logger.Printf("modelstub: stdin closed, exiting")
	case err := <-serveErr:
		logger.Printf("modelstub: serve: %v", err)
		code = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Printf("modelstub: shutdown: %v", err)
	}
	return code
}
