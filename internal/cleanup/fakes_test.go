package cleanup

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
)

// fakeAgent answers session/close attempts from a script, one answer per
// attempt: an error, nil, or (with delay) after that long. It records how
// many attempts were ever in flight at once.
type fakeAgent struct {
	answers []answer
	mu      sync.Mutex
	sent    int
	active  atomic.Int32
	overlap atomic.Bool
	settled []time.Time // when each attempt settled
	sentAt  []time.Time
}

type answer struct {
	err   error
	delay time.Duration
	never bool // never answers
}

var errRefused = errors.New("close failed")

func (a *fakeAgent) send() (Call, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ans := answer{}
	if a.sent < len(a.answers) {
		ans = a.answers[a.sent]
	}
	a.sent++
	a.sentAt = append(a.sentAt, time.Now())
	if a.active.Add(1) > 1 {
		a.overlap.Store(true)
	}
	c := &fakeCall{done: make(chan struct{})}
	idx := a.sent - 1
	if !ans.never {
		go func() {
			time.Sleep(ans.delay)
			a.mu.Lock()
			for len(a.settled) <= idx {
				a.settled = append(a.settled, time.Time{})
			}
			a.settled[idx] = time.Now()
			a.mu.Unlock()
			a.active.Add(-1)
			c.err = ans.err
			close(c.done)
		}()
	}
	return c, nil
}

type fakeCall struct {
	done chan struct{}
	err  error
}

func (c *fakeCall) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fakeTree is a tree whose terminations become complete after
// incomplete times; its facts are cumulative like a reaper.Tree's.
type fakeTree struct {
	mu         sync.Mutex
	incomplete int
	calls      int
	refuse     error
}

func (t *fakeTree) terminate() (reaper.Termination, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refuse != nil {
		return reaper.Termination{}, t.refuse
	}
	t.calls++
	res := reaper.Termination{Containment: reaper.ModeProcessGroup}
	for i := 0; i < t.calls; i++ {
		res.Signals = append(res.Signals, reaper.SignalRecord{Signal: "SIGKILL", Target: "tree", At: time.Now()})
	}
	if t.calls <= t.incomplete {
		res.Errors = []reaper.ErrorRecord{{Code: "PROVIDER_KILL_TIMEOUT", Message: "secret-xyz did not exit"}}
		res.Verified = reaper.Verification{Method: "fake: populated"}
		return res, nil
	}
	code := 0
	res.Processes = []reaper.ProcessRecord{{Pid: 42, Role: reaper.RoleProvider, ExitCode: &code, ExitedAt: time.Now()}}
	res.Verified = reaper.Verification{TreeEmpty: true, Method: "fake: empty"}
	res.Complete = true
	return res, nil
}
