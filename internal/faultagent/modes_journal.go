package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// journalModes holds the modes stream=<N>:<ms> and usage-grow=<n> (see
// package doc): a turn that streams many updates slowly (so a test can
// kill the host or the sidecar in the middle of it), and usage_update
// values that change every turn (so a test can tell which turn's usage
// was kept).
type journalModes struct {
	streamN     int
	streamPause time.Duration
	usageGrow   int
}

// parse sets a mode of journalModes from its value.
func (m *journalModes) parse(name, val string, hasVal bool) error {
	switch name {
	case "stream":
		n, ms, ok := strings.Cut(val, ":")
		count, err1 := strconv.Atoi(n)
		pause, err2 := strconv.Atoi(ms)
		if !hasVal || !ok || err1 != nil || err2 != nil || count < 0 || pause < 0 {
			return errors.New("mode stream needs =<count>:<ms>")
		}
		m.streamN, m.streamPause = count, time.Duration(pause)*time.Millisecond
	case "usage-grow":
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 0 {
			return errors.New("mode usage-grow needs =<tokens>")
		}
		m.usageGrow = n
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return nil
}

// stream emits the stream=<N>:<ms> chunks "stream <i>;" (i from 0), one
// every ms milliseconds, until done or cancel.
func (a *agent) stream(emit func(json.RawMessage), cancel <-chan struct{}) {
	for i := 0; i < a.cfg.streamN; i++ {
		if i > 0 && a.cfg.streamPause > 0 {
			t := time.NewTimer(a.cfg.streamPause)
			select {
			case <-t.C:
			case <-cancel:
				t.Stop()
				return
			}
		}
		select {
		case <-cancel:
			return
		default:
		}
		emit(chunk("agent_message_chunk", fmt.Sprintf("stream %d;", i)))
	}
}

// withUsageGrowth sets, in mode usage-grow=<n>, the usage_update's used to
// n times the number of turns the session has run (size stays).
func (a *agent) withUsageGrowth(update json.RawMessage, turns int) json.RawMessage {
	if a.cfg.usageGrow <= 0 {
		return update
	}
	return withMember(update, "used", a.cfg.usageGrow*turns)
}
