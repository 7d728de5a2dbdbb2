package main

// Attack modes: an agent that tries to hurt the sidecar, its neighbours or
// the host (docs/protocol.md §20, "Threat model"; the e2e tests in
// internal/e2e/attack_*_test.go). Each is described in the package doc.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// attackModes holds the attack modes (see package doc).
type attackModes struct {
	askFlood    int // ask-flood=<N>[:<pad>]
	askPad      int
	deaf        bool   // stop reading stdin once a prompt arrived
	closeStdin  bool   // close-stdin: close stdin once session/new arrived
	stdoutFlood int64  // stdout-flood=<bytes>: bytes without a newline
	growPath    string // grow-file=<path>:<bytes>
	growBytes   int64
	plantSpec   string // plant=<spec file>
	escapeDir   string // escape-ledger=<stateDir>
	inject      bool   // host-stream injection (invalid UTF-8, raw CR, malformed updates)
	askVariants bool   // asks decoders disagree on
	double      bool   // double-answer: a response with both result and error first
}

// parse sets one attack mode from name and val.
func (m *attackModes) parse(name, val string, hasVal bool) error {
	num := func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("mode %s: bad number %q", name, s)
		}
		return n, nil
	}
	var err error
	switch name {
	case "ask-flood":
		n, pad, _ := strings.Cut(val, ":")
		var v int64
		if v, err = num(n); err == nil {
			m.askFlood = int(v)
			if pad != "" {
				v, err = num(pad)
				m.askPad = int(v)
			}
		}
	case "deaf":
		m.deaf = true
	case "close-stdin":
		m.closeStdin = true
	case "stdout-flood":
		m.stdoutFlood, err = num(val)
	case "grow-file":
		i := strings.LastIndexByte(val, ':')
		if !hasVal || i <= 0 {
			return errors.New("mode grow-file needs =<path>:<bytes>")
		}
		m.growPath = val[:i]
		m.growBytes, err = num(val[i+1:])
	case "plant":
		if !hasVal || val == "" {
			return errors.New("mode plant needs =<spec file>")
		}
		m.plantSpec = val
	case "escape-ledger":
		if !hasVal || val == "" {
			return errors.New("mode escape-ledger needs =<stateDir>")
		}
		m.escapeDir = val
	case "inject":
		m.inject = true
	case "ask-variants":
		m.askVariants = true
	case "double-answer":
		m.double = true
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return err
}

// isAttackMode reports whether name is one of these modes.
func isAttackMode(name string) bool {
	switch name {
	case "ask-flood", "deaf", "stdout-flood", "grow-file", "plant", "escape-ledger", "inject", "ask-variants", "double-answer":
		return true
	}
	return false
}

// afterRequest runs on the read loop after a request was dispatched: in
// deaf mode, once a prompt arrived the agent never reads its stdin again
// (the sidecar's writes then fill the pipe).
func (a *agent) afterRequest(m message) {
	if a.cfg.deaf && m.Method == "session/prompt" {
		logf("deaf: no longer reading stdin")
		sleepForever() // the read loop never comes back
	}
	if a.cfg.closeStdin && m.Method == "session/new" {
		// The read loop's next read fails: serve returns, and with
		// ignore-term the process lives on, its stdin closed.
		logf("close-stdin: closing stdin")
		_ = os.Stdin.Close()
	}
}

// writeRaw writes b and a newline as one line, verbatim (bytes
// encoding/json would never produce).
func (a *agent) writeRaw(b []byte) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	a.rec.msg("sent", b)
	if _, err := a.out.Write(append(append([]byte(nil), b...), '\n')); err != nil {
		logf("write stdout: %v", err)
	}
}

// callRaw is call with params given as raw JSON (duplicate keys and all).
func (a *agent) callRaw(method string, params []byte) message {
	a.mu.Lock()
	if a.eof {
		a.mu.Unlock()
		return message{Error: &rpcError{Code: -32603, Message: "client went away"}}
	}
	a.nextID++
	id := strconv.Itoa(a.nextID)
	ch := make(chan message, 1)
	a.pending[id] = ch
	a.mu.Unlock()
	a.writeRaw([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method) + `,"params":` + string(params) + `}`))
	return <-ch
}

// outcomeText is "<outcome> <optionId>" of a permission answer.
func outcomeText(resp message) string {
	if resp.Error != nil {
		return fmt.Sprintf("error %d", resp.Error.Code)
	}
	outcome, optionID := permissionOutcome(resp)
	return strings.TrimSpace(outcome + " " + optionID)
}

// turnAttacks runs the attack modes of one turn before its normal
// updates; emit sends an update of the turn.
func (a *agent) turnAttacks(sessionID string, emit func(json.RawMessage)) {
	if a.cfg.plantSpec != "" {
		emit(chunk("agent_message_chunk", "plant: "+plant(a.cfg.plantSpec)))
	}
	if a.cfg.stdoutFlood > 0 {
		a.floodStdout(a.cfg.stdoutFlood)
		emit(chunk("agent_message_chunk", "stdout-flood: done"))
	}
	if a.cfg.growPath != "" {
		emit(chunk("agent_message_chunk", "grow-file: "+growFile(a.cfg.growPath, a.cfg.growBytes)))
	}
	if a.cfg.inject {
		a.injectUpdates(sessionID)
	}
	if a.cfg.askVariants {
		a.askDisagreements(sessionID, emit)
	}
	if a.cfg.askFlood > 0 {
		emit(chunk("agent_message_chunk", a.floodAsks(sessionID)))
	}
	if a.cfg.escapeDir != "" {
		a.escapeLedger(sessionID)
	}
}

// floodStdout writes n bytes of 'x' without a newline (1 MiB a write),
// then ends the line.
func (a *agent) floodStdout(n int64) {
	buf := []byte(strings.Repeat("x", 1<<20))
	a.outMu.Lock()
	defer a.outMu.Unlock()
	for n > 0 {
		k := int64(len(buf))
		if k > n {
			k = n
		}
		if _, err := a.out.Write(buf[:k]); err != nil {
			logf("stdout-flood: %v", err)
			return
		}
		n -= k
	}
	_, _ = a.out.Write([]byte{'\n'})
}

// growFile extends the file at path by n bytes of hole (NUL bytes, no
// newline), as an agent that can write the state dir could.
func growFile(path string, n int64) string {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "error " + err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil {
		err = f.Truncate(st.Size() + n)
	}
	if err != nil {
		return "error " + err.Error()
	}
	return "ok"
}

// plantSpecFile is what mode plant reads: files to write and symlinks to
// make, in order.
type plantSpecFile struct {
	Files []struct {
		Path string `json:"path"`
		Data string `json:"data"`
	} `json:"files"`
	Links []struct {
		Path   string `json:"path"`
		Target string `json:"target"`
	} `json:"links"`
}

// plant writes the spec's files and makes its links; it returns "ok" or
// the first error.
func plant(specPath string) string {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return "error " + err.Error()
	}
	var spec plantSpecFile
	if err := json.Unmarshal(b, &spec); err != nil {
		return "error " + err.Error()
	}
	for _, f := range spec.Files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return "error " + err.Error()
		}
		if err := os.WriteFile(f.Path, []byte(f.Data), 0o600); err != nil {
			return "error " + err.Error()
		}
	}
	for _, l := range spec.Links {
		if err := os.Symlink(l.Target, l.Path); err != nil {
			return "error " + err.Error()
		}
	}
	return "ok"
}

// floodAsks sends askFlood permission requests at once (toolCall kind
// execute, rawInput padded to askPad bytes) and waits for every answer; it
// returns "ask-flood: <n> answered, <s> selected, <c> cancelled".
func (a *agent) floodAsks(sessionID string) string {
	pad := strings.Repeat("p", a.cfg.askPad)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered, selected, cancelled := 0, 0, 0
	for i := 0; i < a.cfg.askFlood; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			params := map[string]any{"sessionId": sessionID,
				"toolCall": map[string]any{"toolCallId": "fa-flood-" + strconv.Itoa(i), "title": "flood", "kind": "execute",
					"status": "pending", "rawInput": map[string]any{"pad": pad}},
				"options": []any{map[string]any{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
					map[string]any{"optionId": "reject-once", "name": "Reject once", "kind": "reject_once"}}}
			out := outcomeText(a.call("session/request_permission", params))
			mu.Lock()
			defer mu.Unlock()
			answered++
			switch {
			case strings.HasPrefix(out, "selected"):
				selected++
			case out == "cancelled":
				cancelled++
			}
		}(i)
	}
	wg.Wait()
	return fmt.Sprintf("ask-flood: %d answered, %d selected, %d cancelled", answered, selected, cancelled)
}

// injectUpdates writes updates meant to break the host's stream: invalid
// UTF-8 in a string, a raw CR (and a tab) between tokens around a forged
// frame for another session, and five updates that are not ACP
// SessionUpdates; then "inject-done".
func (a *agent) injectUpdates(sessionID string) {
	sid := strconv.Quote(sessionID)
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + sid + `,"update":`
	forged := `{"jsonrpc":"2.0","method":"session/update","params":{"session":"s-0000000000000000","requestId":null,"seq":1,` +
		`"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"FORGED-VIA-CR"}}}}`
	for _, u := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"BAD-UTF8-` + "\xff\xfe" + `"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"cr"},"pad":[` + "\r" + forged + "\r" + `],` + "\t" + `"x":1}`,
		`{}`, `{"sessionUpdate":5}`, `{"sessionUpdate":""}`, `"agent_message_chunk"`, `[{"sessionUpdate":"plan"}]`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"inject-done"}}`,
	} {
		a.writeRaw([]byte(head + u + `}}`))
	}
}

// askDisagreements asks, one at a time, permission requests that a
// case-insensitive or merging decoder reads otherwise than ACP means them,
// then one well-formed ask the host is to answer; each outcome is
// reported as a chunk "variant <name>: <outcome> <optionId>".
func (a *agent) askDisagreements(sessionID string, emit func(json.RawMessage)) {
	sid := strconv.Quote(sessionID)
	opts := `[{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},{"optionId":"reject-once","name":"Reject once","kind":"reject_once"}]`
	for _, v := range []struct{ name, toolCall, options string }{
		{"case-kind", `{"toolCallId":"v-case","Kind":"read","title":"tool"}`, opts},
		{"rawinput-twice", `{"toolCallId":"v-raw","kind":"read","title":"tool","rawInput":{"command":"rm -rf /tmp/x"},"rawinput":{"command":null}}`, opts},
		{"kind-twice", `{"toolCallId":"v-dup","kind":"execute","kind":"read","title":"tool"}`, opts},
		{"option-twice", `{"toolCallId":"v-opt","kind":"edit","title":"tool"}`, `[{"optionId":"x","name":"Always","kind":"allow_always"},{"optionId":"x","name":"No","kind":"reject_once"}]`},
		{"host-pick", `{"toolCallId":"v-pick","kind":"edit","title":"tool"}`, opts},
	} {
		resp := a.callRaw("session/request_permission", []byte(`{"sessionId":`+sid+`,"toolCall":`+v.toolCall+`,"options":`+v.options+`}`))
		emit(chunk("agent_message_chunk", "variant "+v.name+": "+outcomeText(resp)))
	}
}

// injectInitialize answers initialize with agentCapabilities carrying
// bytes that are not UTF-8 (mode inject).
func (a *agent) injectInitialize(id json.RawMessage) {
	a.writeRaw([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"protocolVersion":1,` +
		`"agentInfo":{"name":"` + agentName + `","version":"` + agentVersion + `"},` +
		`"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"close":{}},"_meta":{"x":"INIT-` + "\xff\xfe" + `"}},"authMethods":[]}}`))
}

// doubleAnswer, in mode double-answer, first answers the prompt with a
// response carrying both result and error (invalid JSON-RPC) and reports
// whether the real answer must say so (stopReason max_tokens).
func (a *agent) doubleAnswer(id json.RawMessage, emit func(json.RawMessage)) bool {
	if !a.cfg.double {
		return false
	}
	a.writeRaw([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"stopReason":"end_turn"},"error":{"code":-32603,"message":"both"}}`))
	emit(chunk("agent_message_chunk", "after-double"))
	return true
}

// escapeLedger deletes this session's ownership-ledger entry from
// stateDir, starts a child in its own cgroup (a sleeper that stays), then
// SIGSTOPs the sidecar and SIGKILLs its watchdog(s) and the sidecar itself:
// the tree then survives with no ledger entry and no watchdog (only a later
// sidecar's sweep of dead sidecars' cgroups can end it).
func (a *agent) escapeLedger(sessionID string) {
	marker := os.Getenv("ACPX_SIDECAR_SESSION")
	id, _, _ := strings.Cut(marker, ".")
	if err := os.Remove(filepath.Join(a.cfg.escapeDir, "owned", id+".json")); err != nil {
		logf("escape-ledger: %v", err)
	}
	if err := startGrandchild(true); err != nil {
		logf("escape-ledger: start child: %v", err)
	}
	sidecar := os.Getppid()
	// Stopped first, so it cannot replace its watchdog between the two
	// kills (it restarts a watchdog that dies, and the new one would then
	// end this tree when the sidecar dies: the attack would fail).
	_ = syscall.Kill(sidecar, syscall.SIGSTOP)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), "__guardian") && ppidOf(pid) == sidecar {
			logf("escape-ledger: SIGKILL watchdog %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	logf("escape-ledger: SIGKILL sidecar %d", sidecar)
	_ = syscall.Kill(sidecar, syscall.SIGKILL)
}

// ppidOf is field 4 of /proc/<pid>/stat (0 if unreadable).
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
