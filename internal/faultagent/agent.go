package main

// The agent core: reading and writing messages, calls to the client, the
// method table, and initialize.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Names and values the agent reports; tests match on them.
const (
	agentName     = "faultagent"
	agentVersion  = "0.1.0"
	helloText     = "hello from faultagent"
	defaultModel  = "fa-model"
	largeModel    = "fa-large"
	defaultModeID = "default"
	contextSize   = 1000
)

// JSON-RPC error codes used by the agent (JSON-RPC 2.0 §5.1; ACP uses
// -32002 for an unknown resource).
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeNotFound       = -32002
)

// message is one JSON-RPC 2.0 message in either direction.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// session is one ACP session the agent holds.
type session struct {
	ID      string            `json:"sessionId"`
	Model   string            `json:"model"`
	Mode    string            `json:"mode"`
	History []json.RawMessage `json:"history"` // recorded `update` objects, in order
	Turns   int               `json:"turns"`   // prompts run (mode cost)
	Fast    bool              `json:"fast"`    // the boolean config option fa-fast (modes_ext.go)
	// Controls are the controls mode's option values (modes_controls.go).
	Controls map[string]string `json:"controls,omitempty"`

	cancel chan struct{} // closed by session/cancel; nil when no turn runs
}

type agent struct {
	cfg config

	outMu   sync.Mutex
	out     io.Writer
	garbage int

	// persistMu makes persist one at a time, so the file holds the
	// session as the last writer saw it.
	persistMu sync.Mutex

	mu       sync.Mutex
	sessions map[string]*session
	// booleanOptions: the client advertised
	// clientCapabilities.session.configOptions.boolean (guarded by mu).
	booleanOptions bool
	nextID         int
	pending        map[string]chan message // our requests awaiting a response
	eof            bool                    // stdin ended: no response can arrive

	inflight sync.WaitGroup // request handlers still running

	rec        *recorder     // mode record; nil records nothing
	term       chan struct{} // closed at the first trapped SIGTERM
	closeFails int           // session/close requests failed (mode error-close)
	// clientElicit: initialize's clientCapabilities.elicitation (mode elicit).
	clientElicit json.RawMessage
	// slowCloseDone: the first session/close was answered late
	// (mode slow-error-close).
	slowCloseDone bool
}

func newAgent(cfg config, out io.Writer) *agent {
	return &agent{cfg: cfg, out: out, sessions: map[string]*session{}, pending: map[string]chan message{},
		term: make(chan struct{})}
}

// serve reads messages until r ends; requests run in their own goroutine
// so that a turn can be cancelled while it runs. At the end of r it fails
// our pending requests and waits for the running handlers (hang-* handlers
// return without answering, so they do not hold it up).
func (a *agent) serve(r io.Reader) error {
	err := readLines(r, a.handleLine)
	a.mu.Lock()
	a.eof = true
	for id, ch := range a.pending {
		ch <- message{Error: &rpcError{Code: -32603, Message: "client went away"}}
		delete(a.pending, id)
	}
	a.mu.Unlock()
	a.inflight.Wait()
	return err
}

func (a *agent) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		logf("recv unparsable line (%d bytes): %v", len(line), err)
		return
	}
	a.tap(append(append([]byte(nil), line...), '\n')) // mode tap (modes_ext.go)
	a.rec.msg("recv", line)
	if m.Method == "" {
		logf("recv response id=%s", m.ID)
		a.mu.Lock()
		ch := a.pending[string(m.ID)]
		delete(a.pending, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	logf("recv %s id=%s", m.Method, m.ID)
	if len(m.ID) == 0 {
		a.notification(m)
		return
	}
	a.inflight.Add(1)
	go func() {
		defer a.inflight.Done()
		a.request(m)
	}()
	a.afterRequest(m) // mode deaf (modes_attack.go)

}

// write sends one message as one line (after a garbage line in
// garbage-stdout mode).
func (a *agent) write(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		logf("marshal: %v", err)
		return
	}
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if a.cfg.garbageStdout {
		a.garbage++
		fmt.Fprintf(a.out, "faultagent garbage line %d: this is not JSON\n", a.garbage)
	}
	a.rec.msg("sent", b)
	if _, err := a.out.Write(append(b, '\n')); err != nil {
		logf("write stdout: %v", err)
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		logf("marshal result: %v", err)
		return
	}
	a.write(message{ID: id, Result: b})
}

func (a *agent) fail(id json.RawMessage, code int, msg string) {
	a.write(message{ID: id, Error: &rpcError{Code: code, Message: msg}})
}

// call sends a request to the client and waits for its response.
func (a *agent) call(method string, params any) message {
	_, ch := a.send(method, params)
	return <-ch
}

// send sends a request to the client and returns its id and the channel
// its response arrives on (at once a -32603 when stdin has ended).
func (a *agent) send(method string, params any) (json.RawMessage, chan message) {
	p, _ := json.Marshal(params)
	ch := make(chan message, 1)
	a.mu.Lock()
	if a.eof {
		a.mu.Unlock()
		ch <- message{Error: &rpcError{Code: -32603, Message: "client went away"}}
		return nil, ch
	}
	a.nextID++
	id := json.RawMessage(strconv.Itoa(a.nextID))
	a.pending[string(id)] = ch
	a.mu.Unlock()
	a.write(message{ID: id, Method: method, Params: p})
	return id, ch
}

func (a *agent) notification(m message) {
	switch m.Method {
	case "session/cancel":
		a.mu.Lock()
		a.cancelTurnLocked(sessionIDOf(m.Params))
		a.mu.Unlock()
	default:
		if strings.HasPrefix(m.Method, "_") {
			a.extNotification(m) // modes_ext.go
		}
		// Other unknown notifications are ignored (JSON-RPC 2.0 §4.1).
	}
}

func (a *agent) request(m message) {
	switch m.Method {
	case "initialize":
		a.initialize(m)
	case "authenticate":
		a.authenticate(m)
	case "session/new":
		if a.needsAuth() {
			a.fail(m.ID, -32000, "Authentication required")
			return
		}
		a.newSession(m)
	case "session/load":
		a.loadSession(m, true)
	case "session/resume":
		if !a.cfg.resume {
			a.fail(m.ID, codeMethodNotFound, "method not found: session/resume")
			return
		}
		a.loadSession(m, false)
	case "session/prompt":
		a.prompt(m)
	case "session/close":
		a.closeSession(m)
	case "session/set_model":
		a.setModel(m)
	case "session/set_config_option":
		a.setConfigOption(m)
	case "session/set_mode":
		a.setMode(m)
	case "session/list":
		if !a.cfg.caps["list"] {
			a.fail(m.ID, codeMethodNotFound, "method not found: session/list")
			return
		}
		a.listSessions(m) // modes_ext.go
	default:
		if strings.HasPrefix(m.Method, "_") {
			a.extRequest(m) // modes_ext.go
			return
		}
		a.fail(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func (a *agent) initialize(m message) {
	if a.cfg.hangInitialize {
		logf("hang-initialize: not answering")
		return
	}
	if a.cfg.inject {
		a.injectInitialize(m.ID)
		return
	}
	var p struct {
		ProtocolVersion    int `json:"protocolVersion"`
		ClientCapabilities struct {
			Elicitation json.RawMessage `json:"elicitation"`
		} `json:"clientCapabilities"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.noteBooleanOptions(m.Params) // modes_ext.go
	a.mu.Lock()
	a.clientElicit = p.ClientCapabilities.Elicitation
	a.mu.Unlock()
	caps := map[string]any{"loadSession": true}
	sc := map[string]any{}
	if !a.cfg.closeUnsupported {
		sc["close"] = map[string]any{}
	}
	if a.cfg.resume {
		sc["resume"] = map[string]any{}
	}
	a.extCaps(caps, sc) // modes_ext.go
	caps["sessionCapabilities"] = sc
	a.reply(m.ID, map[string]any{
		"protocolVersion":   1,
		"agentInfo":         map[string]any{"name": agentName, "version": agentVersion},
		"agentCapabilities": caps,
		"authMethods":       a.authAdvertised(),
	})
}
