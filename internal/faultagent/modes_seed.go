package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// seedModes holds the modes the e2e tests of docs/rules.md use (see package
// doc): record, error-new, agent-session-id, hog, groupchild, mortal-child, new-on-term,
// close-error-on-term, error-close, slow-error-close, stale-config, no-config-options, cost.
type seedModes struct {
	recordFile       string  // record=<file>
	errorNew         string  // error-new=<text>
	agentSessionID   string  // agent-session-id=<id>
	hogMiB           int     // hog=<MiB>
	groupChild       bool    // groupchild
	mortalChild      bool    // mortal-child
	newOnTerm        bool    // new-on-term
	closeErrorOnTerm bool    // close-error-on-term
	errorClose       int     // error-close=<n>
	slowErrorCloseMs int     // slow-error-close=<ms>
	staleConfig      bool    // stale-config
	noConfigOptions  bool    // no-config-options
	cost             float64 // cost=<amount> (per turn; reported cumulative)
}

// parse sets mode name from val; hasVal says whether "=" was given.
func (m *seedModes) parse(name, val string, hasVal bool) error {
	num := func() (int, error) {
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 0 {
			return 0, fmt.Errorf("mode %s: bad number %q", name, val)
		}
		return n, nil
	}
	var err error
	switch name {
	case "record", "error-new", "agent-session-id":
		if !hasVal || val == "" {
			return fmt.Errorf("mode %s needs =<value>", name)
		}
		switch name {
		case "record":
			m.recordFile = val
		case "error-new":
			m.errorNew = val
		default:
			m.agentSessionID = val
		}
	case "hog":
		m.hogMiB, err = num()
	case "groupchild":
		m.groupChild = true
	case "mortal-child":
		m.mortalChild = true
	case "new-on-term":
		m.newOnTerm = true
	case "close-error-on-term":
		m.closeErrorOnTerm = true
	case "error-close":
		m.errorClose, err = num()
	case "slow-error-close":
		m.slowErrorCloseMs, err = num()
	case "stale-config":
		m.staleConfig = true
	case "no-config-options":
		m.noConfigOptions = true
	case "cost":
		if !hasVal {
			return errors.New("mode cost needs =<amount>")
		}
		m.cost, err = strconv.ParseFloat(val, 64)
		if err == nil && m.cost < 0 {
			err = fmt.Errorf("mode cost: negative amount %q", val)
		}
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return err
}

// trapsTerm reports whether SIGTERM is trapped (and the process keeps
// running after stdin EOF), so that only SIGKILL ends it.
func (c config) trapsTerm() bool { return c.ignoreTerm || c.newOnTerm || c.closeErrorOnTerm }

// withSeedCost adds, in mode cost, the cumulative session cost after turns
// turns to a usage_update object (ACP UsageUpdate.cost is cumulative).
func (a *agent) withSeedCost(update json.RawMessage, turns int) json.RawMessage {
	if a.cfg.cost <= 0 {
		return update
	}
	return withMember(update, "cost", map[string]any{"amount": a.cfg.cost * float64(turns), "currency": "USD"})
}

// recorder appends one JSON object a line to the file of mode record=<file>:
// {"dir":"start","pid":N,"argv":[...]} first, then {"dir":"recv"|"sent",
// "msg":<message verbatim>} for every message, in the order they happened.
// Tests read it to assert exactly what the agent was sent (and answered).
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

// openRecorder creates (or appends to) path and writes the start line.
func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	r := &recorder{f: f}
	b, _ := json.Marshal(map[string]any{"dir": "start", "pid": os.Getpid(), "argv": os.Args})
	r.line(b)
	return r, nil
}

// msg records one message; raw must be one JSON value. A nil recorder
// records nothing.
func (r *recorder) msg(dir string, raw []byte) {
	if r == nil {
		return
	}
	b, err := json.Marshal(map[string]any{"dir": dir, "msg": json.RawMessage(raw)})
	if err != nil {
		logf("record: %v", err)
		return
	}
	r.line(b)
}

func (r *recorder) line(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		logf("record: %v", err)
	}
}
