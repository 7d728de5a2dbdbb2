package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/agentenv"
	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
)

// Egress by name (docs/protocol.md §19.1) in runAgentSuite: the five pinned
// agents run the suite's first session — its text and tool turns — with
// only the model stub's loopback address listed; a tool turn finds
// another loopback port and another address unreachable, at once; and an
// agent configured with http://model.test:<port> (pinned by the
// sidecar's --resolve) works through a listed name, audited connection by
// connection with the bytes its stub saw.

// egressAgents are the agents whose suite runs under an allow list.
var egressAgents = map[string]bool{"codex": true, "claude": true, "gemini": true, "opencode": true, "codex-legacy": true}

// egressFlags are the sidecar flags every agent run starts with: the name
// the egress steps configure agents with, pinned to loopback.
var egressFlags = []string{"--resolve", "model.test=127.0.0.1"}

// stubPort is the port of the run's model stub.
func (a *agentRun) stubPort() string {
	u, err := url.Parse(a.stubURL)
	if err != nil {
		a.t.Fatal(err)
	}
	return u.Port()
}

// withEgress adds to the main session's open params the allow list of
// the stub's loopback address alone (egressAgents only).
func (a *agentRun) withEgress(extra map[string]any) map[string]any {
	if egressAgents[a.name] {
		extra["sandbox"] = allowSandbox("127.0.0.1:" + a.stubPort())
	}
	return extra
}

// egressTool has the agent's shell tool try the listed stub, another
// loopback port (otherPort, a live server) and an address outside: only
// the stub answers; the other two fail at once (curl's http_code 000, in
// well under its 10 s bound) and the outside address is audited denied.
// Agents whose own tool sandbox keeps commands off the network (codex in
// its default mode) reach nothing from the tool; the model's traffic of
// this very turn went through the allow list all the same.
func (a *agentRun) egressTool(o agentOpen, otherPort int) {
	t := a.t
	t.Helper()
	if !egressAgents[a.name] {
		return
	}
	w := func(tag, url string) string {
		return fmt.Sprintf(`curl -s -m 10 -o /dev/null -w "%s=%%{http_code}:%%{time_total} " %s`, tag, url)
	}
	cmd := w("listed", "http://127.0.0.1:"+a.stubPort()+"/") + " > egress.txt; " +
		w("other", "http://127.0.0.1:"+strconv.Itoa(otherPort)+"/") + " >> egress.txt; " +
		w("outside", "http://1.1.1.1/") + " >> egress.txt"
	a.prompt(o.Session, "t2n", "try the network\nrun: "+cmd)
	b, err := os.ReadFile(filepath.Join(a.work, "egress.txt"))
	if err != nil {
		t.Fatalf("the network tool did not run: %v (stub commands %v)", err, a.stub.Stats().Commands)
	}
	got := map[string][2]string{}
	for _, f := range strings.Fields(string(b)) {
		tag, rest, _ := strings.Cut(f, "=")
		code, secs, _ := strings.Cut(rest, ":")
		got[tag] = [2]string{code, secs}
	}
	t.Logf("%s: the tool's curls: %s", a.name, b)
	for _, tag := range []string{"other", "outside"} {
		secs, _ := strconv.ParseFloat(got[tag][1], 64)
		if got[tag][0] != "000" || secs > 5 {
			t.Errorf("%s: %s answered %s after %ss, want no connection at once", a.name, tag, got[tag][0], got[tag][1])
		}
	}
	if got["listed"][0] == "000" {
		t.Logf("%s: its tool reaches no network by itself (its own sandbox)", a.name)
	} else {
		if got["listed"][0] != "404" {
			t.Errorf("%s: the listed stub answered %s, want 404", a.name, got["listed"][0])
		}
		a.s.waitNote("session/network", 10*time.Second, func(raw json.RawMessage) bool {
			return strings.Contains(string(raw), `"destination":"1.1.1.1:80"`) && strings.Contains(string(raw), `"decision":"denied"`)
		})
	}
	if n := networkNotes(a.s, o.Session); len(n) == 0 {
		t.Errorf("%s: no session/network entry for a session whose model turns went through the allow list", a.name)
	}
}

// egressByName opens the agent configured with http://model.test:<port>
// of a stub of its own, with only model.test:<port> listed: a text turn
// completes, and once the session is closed its allowed entries are one
// per connection the stub accepted, their bytes the stub's own counts.
func (a *agentRun) egressByName() {
	t := a.t
	t.Helper()
	if !egressAgents[a.name] {
		return
	}
	port, seen := countingServer(t, modelstub.New(t.Logf))
	p := strconv.Itoa(port)
	l, err := agentenv.Prepare(a.name, repoRoot, "http://model.test:"+p, agentenv.KeyHome(a.stateDir, "names"))
	if err != nil {
		t.Fatal(err)
	}
	params := a.openParamsFor(l, "names", map[string]any{"permissionMode": "approve-all", "sandbox": allowSandbox("model.test:" + p)})
	var o agentOpen
	a.s.mustCall("session/open", params, &o)
	if text := a.turnText(o.Session, "n1", "say hello"); !strings.Contains(text, modelstub.HelloText) {
		t.Errorf("%s by name: streamed %q, want the stub's %q", a.name, text, modelstub.HelloText)
	}
	a.close(o.Session)
	in, out, accepted, _ := seen.snapshot()
	var n, sumOut, sumIn int64
	for _, e := range networkNotes(a.s, o.Session) {
		if e.Decision != "allowed" {
			continue
		}
		if e.Destination != "model.test:"+p {
			t.Errorf("%s by name: allowed entry %+v", a.name, e)
		}
		n, sumOut, sumIn = n+1, sumOut+e.BytesOut, sumIn+e.BytesIn
	}
	if n != accepted || sumOut != in || sumIn != out || n == 0 {
		t.Errorf("%s by name: %d allowed entries, %d bytes out, %d in; the stub accepted %d connections, read %d, wrote %d",
			a.name, n, sumOut, sumIn, accepted, in, out)
	}
}
