package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"))
}

// TestRun_PrintsAddrServesAndExitsOnStdinEOF: the stdout contract (one JSON
// line with the bound loopback address), --codex-home, and exit 0 once the
// parent closes stdin.
func TestRun_PrintsAddrServesAndExitsOnStdinEOF(t *testing.T) {
	home := filepath.Join(t.TempDir(), "ch")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--codex-home", home}, inR, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Addr string }
	if err := json.Unmarshal([]byte(line), &got); err != nil || !strings.HasPrefix(got.Addr, "127.0.0.1:") {
		t.Fatalf("first stdout line %q (%v)", line, err)
	}
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil || !strings.Contains(string(cfg), "http://"+got.Addr+"/v1") ||
		!strings.Contains(string(cfg), `model = "gpt-5.5"`) || !strings.Contains(string(cfg), "shell_snapshot = false") {
		t.Fatalf("config.toml is not codex 2.x's (docs/agents.md): %q (%v)", cfg, err)
	}
	resp, err := http.Get("http://" + got.Addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/stats status %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	inW.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d", c)
	}
	if rest, _ := io.ReadAll(outR); len(rest) != 0 {
		t.Fatalf("extra stdout %q", rest)
	}
}
