// Command faultagent is a scriptable, fault-injecting ACP agent for tests:
// JSON-RPC 2.0, one message per line on stdin/stdout, no limit on line
// length. Each received message is logged to stderr as
// `faultagent: recv <method|response> id=<id>`.
//
// It is a test program, not a product: it lives under internal/ and
// `make build` does not build it. The tests that launch it (internal/e2e,
// internal/adapter, this package) build it into a temporary directory;
// to run it by hand, build it explicitly:
//
//	go build -o /tmp/faultagent ./internal/faultagent
//
// Usage:
//
//	faultagent [--mode m1,m2=v,...] [--state-dir DIR]   (DIR "~/x": $HOME/x, made if missing)
//
// The mode list may also come from env FAULTAGENT_MODE (the flag wins) and
// the state dir from FAULTAGENT_STATE_DIR. Modes (combine freely):
//
//	normal             the default behaviour below (always on)
//	hang-initialize    never answer initialize
//	hang-new           never answer session/new
//	late-new=<ms>      answer session/new after ms milliseconds
//	no-session-id      session/new result has no sessionId
//	crash-mid-turn     exit 3 right after the first update of a turn
//	mute-mid-turn      right after the first update of a turn, close stdout
//	                   and block for good (the process lives on: the ACP
//	                   connection ends before its exit can be seen)
//	ignore-term        trap SIGTERM (logged, ignored) and keep running after
//	                   stdin EOF, so only SIGKILL ends it
//	grandchild         at start, re-exec itself under setsid as a grandchild
//	                   that ignores SIGTERM and sleeps forever (its pid is
//	                   logged); startup waits until it has set that up
//	flood=<N>          N extra agent_message_chunk updates per turn, unpaced
//	long-line=<bytes>  one extra agent_message_chunk whose text is that long
//	garbage-stdout     a non-JSON line on stdout before every message
//	permission=<kind>  each turn asks session/request_permission (toolCall
//	                   kind <kind>, options allow_once/allow_always/
//	                   reject_once/reject_always) and reports
//	                   "permission: <outcome> <optionId>" in a chunk
//	close-unsupported  no sessionCapabilities.close; session/close -> -32601
//	hang-close         advertise close but never answer session/close
//	slow-turn=<ms>     a turn lasts ms milliseconds unless session/cancel
//	record=<file>      append every message received and sent to <file>, one
//	                   JSON object a line: first {"dir":"start","pid":N,
//	                   "argv":[...]}, then {"dir":"recv"|"sent","msg":{...}}
//	                   (the message verbatim), in the order they happened
//	error-new=<text>   session/new fails with -32603 and message <text>, in
//	                   which $VAR / ${VAR} are expanded from the environment
//	agent-session-id=<id>  session/new result carries _meta.agentSessionId <id>
//	hog=<MiB>          touch that much memory at start (its exit after
//	                   SIGKILL then takes the kernel measurable time)
//	groupchild         like grandchild, but without setsid: the child stays
//	                   in the provider's process group and session
//	mortal-child       like groupchild, but the child dies of SIGTERM, and
//	                   the agent reaps it (with ignore-term the agent
//	                   outlives it: its proof entry is reapedBy "parent")
//	new-on-term        session/new is answered only once SIGTERM arrives
//	                   (SIGTERM is then trapped as with ignore-term)
//	close-error-on-term  session/close is answered only once SIGTERM arrives,
//	                   and then with an error (SIGTERM trapped as above)
//	error-close=<n>    the first n session/close requests fail with -32603
//	slow-error-close=<ms>  the first session/close is answered after <ms>,
//	                   with -32603; later ones as without it
//	stale-config       session/set_config_option answers success but keeps
//	                   the old value (the answer shows the old currentValue)
//	no-config-options  session results carry no configOptions (model
//	                   selection then needs legacy session/set_model)
//	cost=<amount>      usage_update carries cost {amount, currency "USD"}:
//	                   the cumulative session cost as ACP defines it, i.e.
//	                   amount times the number of turns the session has run
//	load-resets-controls  session/load reports the default model and mode
//	                   (an agent that does not persist them)
//	load-without-modes  session/load and session/resume answers carry no
//	                   modes
//	controls           sessions offer effort, thought_level and allow_all
//	                   config options; "drift:<id>=<value>" in a prompt sets
//	                   one on the agent's own (modes_controls.go)
//	receipts           "receipt:<variant>" in a prompt sends Grok's usage
//	                   notification (modes_controls.go)
//	recall             each turn first says "recall: <n> earlier prompts:
//	                   <p1>|<p2>…" (the session's earlier prompts)
//	resume             advertise sessionCapabilities.resume; session/resume
//	                   answers the session's state and replays nothing
//	auth=<id>[:<ENV>][;...]  advertise those authMethods (env_var type with
//	                   ENV); session/new fails -32000 "Authentication
//	                   required" until one was authenticated
//	permission-title=<title>  each turn asks session/request_permission with a
//	                   toolCall that has this title and no kind (options
//	                   allow_once/reject_once), reported like permission=
//	stream=<N>:<ms>    N extra agent_message_chunk updates "stream <i>;" per
//	                   turn, ms milliseconds apart (stops at session/cancel)
//	usage-grow=<n>     the turn's usage_update says used = n × the number of
//	                   turns the session has run
//	turn-hog=<MiB>     each turn allocates that much memory (modes_limits.go)
//	turn-forkbomb=<N>  each turn starts up to N sleeper children until a fork
//	                   fails (modes_limits.go)
//	ext-notify, ext-ask=<method>, caps=<a+b>, auth-terminal=<id>, auth-fail,
//	tap=<file>         extension methods, auth, session/list and
//	                   capabilities (modes_ext.go); in every mode `_fa/echo`,
//	                   `_fa/fail` and `_fa/seen` answer extension messages,
//	                   and a client advertising
//	                   session.configOptions.boolean gets the boolean
//	                   config option fa-fast
//	elicit=<kind>      each turn sends elicitation/create: form (a
//	                   requestedSchema with a required strategy enum and an
//	                   integer count 1-9), url (elicitationId fa-elicit-1;
//	                   an accepted one is followed by elicitation/complete)
//	                   or malformed (form without requestedSchema); reports
//	                   "elicit caps: <initialize's clientCapabilities
//	                   .elicitation>" and "elicit: <action> <content>" or
//	                   "elicit: error <code>" (modes_elicit.go)
//	elicit-count=<n>   the turn sends n such elicitations at once and
//	                   reports each answer, in the order sent
//	elicit-withdraw=<ms>  the elicitation is withdrawn with $/cancel_request
//	                   after ms unless answered first
//	permission-withdraw=<ms>  the permission=<kind> ask likewise
//	ext-withdraw=<ms>  the ext-ask=<method> request likewise
//	probe              each turn runs its prompt's lines as sandbox probes
//	                   (write, read, replace, kill, abstract, tcp, procfd,
//	                   cgroup-escape, exec, child) and reports each result
//	                   in a chunk (modes_sandbox.go)
//
// Attack modes (modes_attack.go; the tests in internal/e2e/attack_*):
//
//	ask-flood=<N>[:<pad>]  each turn sends N session/request_permission at
//	                   once (kind execute, rawInput padded to pad bytes),
//	                   waits for all and reports "ask-flood: <n> answered,
//	                   <s> selected, <c> cancelled"
//	deaf               once a session/prompt arrives, never read stdin again
//	close-stdin        once session/new arrives, close stdin (with
//	                   ignore-term: live on, unreachable)
//	stdout-flood=<bytes>  each turn writes that many bytes with no newline,
//	                   then ends the line
//	grow-file=<path>:<bytes>  each turn extends that file by a hole of
//	                   bytes (no newline)
//	plant=<spec>       each turn writes the files and makes the symlinks a
//	                   JSON spec {"files":[{path,data}],"links":[{path,target}]}
//	                   lists; reports "plant: ok"
//	escape-ledger=<stateDir>  in the turn: delete its own ledger entry,
//	                   start a setsid'd child that ignores SIGTERM, SIGSTOP
//	                   the sidecar, SIGKILL its watchdog and the sidecar
//	inject             initialize's agentCapabilities._meta holds invalid
//	                   UTF-8; each turn sends an update with invalid UTF-8, one
//	                   with a raw CR and tab between tokens around a forged
//	                   frame, five updates that are not SessionUpdates, and
//	                   "inject-done"
//	ask-variants       each turn asks five permissions decoders disagree on
//	                   (Kind, rawInput twice by case, kind twice, optionId
//	                   twice) and one well-formed one, reporting "variant
//	                   <name>: <outcome> <optionId>"
//	double-answer      a prompt is first answered with both result and error
//	                   (invalid), then "after-double", then the real answer
//	                   with stopReason max_tokens
//
// Normal behaviour: initialize answers agentInfo {name:"faultagent",
// version:"0.1.0"}, agentCapabilities {loadSession:true,
// sessionCapabilities:{close:{}}}, authMethods []. session/new returns
// sessionId "fa-<hex>", models (fa-model current, fa-large), modes and a
// model configOption. session/prompt streams agent_message_chunk
// "hello from faultagent" and a usage_update, then answers stopReason
// end_turn (cancelled if session/cancel arrived) with usage {10,5,15}.
// session/load replays every recorded update of the session (including a
// user_message_chunk per prompt) before answering; sessions are kept in
// memory and, with a state dir, in DIR/<sessionId>.json so that a fresh
// process can load them. session/close answers {}. session/set_model,
// session/set_config_option (configId "model") and session/set_mode change
// the session. stdin EOF exits 0 (except with ignore-term).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// grandchildFlag is the hidden flag of the re-exec'ed grandchild.
const grandchildFlag = "--faultagent-grandchild"

// mortalArg after grandchildFlag makes a child that keeps SIGTERM's
// default (mode mortal-child).
const mortalArg = "mortal"

// config is the parsed mode list: one embedded group of modes per job
// (their fields are promoted, so a mode reads as c.<field>), and the state
// dir.
type config struct {
	protocolModes // hang-initialize, hang-new, late-new, no-session-id, close-unsupported, hang-close (modes_core.go)
	processModes  // crash-mid-turn, mute-mid-turn, ignore-term, grandchild (modes_core.go)
	turnModes     // flood, long-line, garbage-stdout, permission, slow-turn (modes_core.go)
	permCostModes // permission-title (modes_permcost.go)
	authModes     // auth (modes_auth.go)
	seedModes     // record, error-new, hog, new-on-term, ... (modes_seed.go)
	journalModes  // stream, usage-grow (modes_journal.go)
	limitModes    // turn-hog, turn-forkbomb (modes_limits.go)
	attackModes   // ask-flood, deaf, stdout-flood, ... (modes_attack.go)
	sandboxModes  // probe (modes_sandbox.go)
	extModes      // ext-notify, ext-ask, caps, auth-terminal, auth-fail, tap (modes_ext.go)
	elicitModes   // elicit, elicit-withdraw, permission-withdraw (modes_elicit.go)
	controlModes  // controls, receipts (modes_controls.go)
	stateDir      string
}

// parseModes parses a comma separated mode list (see package doc).
func parseModes(list string) (config, error) {
	var c config
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, hasVal := strings.Cut(item, "=")
		num := func() (int, error) {
			if !hasVal {
				return 0, fmt.Errorf("mode %s needs =<number>", name)
			}
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("mode %s: bad number %q", name, val)
			}
			return n, nil
		}
		var err error
		var n int
		switch name {
		case "normal":
		case "controls":
			c.controls = true
		case "receipts":
			c.receipts = true
		case "hang-initialize":
			c.hangInitialize = true
		case "hang-new":
			c.hangNew = true
		case "late-new":
			n, err = num()
			c.lateNew = time.Duration(n) * time.Millisecond
		case "no-session-id":
			c.noSessionID = true
		case "crash-mid-turn":
			c.crashMidTurn = true
		case "mute-mid-turn":
			c.muteMidTurn = true
		case "ignore-term":
			c.ignoreTerm = true
		case "grandchild":
			c.grandchild = true
		case "flood":
			c.flood, err = num()
		case "long-line":
			c.longLine, err = num()
		case "garbage-stdout":
			c.garbageStdout = true
		case "permission":
			if !hasVal || val == "" {
				return c, errors.New("mode permission needs =<ToolKind>")
			}
			c.permissionKind = val
		case "close-unsupported":
			c.closeUnsupported = true
		case "hang-close":
			c.hangClose = true
		case "permission-title":
			err = c.permCostModes.parse(name, val, hasVal)
		case "auth":
			err = c.parseAuth(val, hasVal)
		case "load-resets-controls":
			c.loadResetsControls = true
		case "load-without-modes":
			c.loadWithoutModes = true
		case "resume":
			c.resume = true
		case "recall":
			c.recall = true
		case "turn-hog", "turn-forkbomb":
			err = c.limitModes.parse(name, val, hasVal)
		case "probe":
			c.probe = true
		case "ext-notify", "ext-ask", "caps", "auth-terminal", "auth-fail", "tap":
			err = c.parseExt(name, val, hasVal)
		case "slow-turn":
			n, err = num()
			c.slowTurn = time.Duration(n) * time.Millisecond
		case "elicit", "elicit-count", "elicit-withdraw", "permission-withdraw", "ext-withdraw":
			err = c.elicitModes.parse(name, val, hasVal)
		case "stream", "usage-grow":
			err = c.journalModes.parse(name, val, hasVal)
		case "ask-flood", "deaf", "close-stdin", "stdout-flood", "grow-file", "plant", "escape-ledger", "inject", "ask-variants", "double-answer":
			err = c.attackModes.parse(name, val, hasVal)
		case "record", "error-new", "agent-session-id", "hog", "groupchild", "mortal-child", "new-on-term",
			"close-error-on-term", "error-close", "slow-error-close", "stale-config", "no-config-options", "cost":
			err = c.seedModes.parse(name, val, hasVal)
		default:
			return c, fmt.Errorf("unknown mode %q", name)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == grandchildFlag {
		grandchildMain()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == tapExecFlag {
		tapExecMain(os.Args[2:])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == probeChildFlag {
		probeChildMain(os.Args[2])
		return
	}
	fs := flag.NewFlagSet("faultagent", flag.ContinueOnError)
	mode := fs.String("mode", os.Getenv("FAULTAGENT_MODE"), "comma separated fault modes (see package doc)")
	stateDir := fs.String("state-dir", os.Getenv("FAULTAGENT_STATE_DIR"), "persist sessions for session/load in `DIR`")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	cfg, err := parseModes(*mode)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultagent: %v\n", err)
		os.Exit(2)
	}
	cfg.stateDir = *stateDir
	if rest, ok := strings.CutPrefix(cfg.stateDir, "~/"); ok {
		cfg.stateDir = filepath.Join(os.Getenv("HOME"), rest) // its launch HOME's (a key's private one)
		_ = os.MkdirAll(cfg.stateDir, 0o700)
	}
	logf("start pid=%d modes=%q", os.Getpid(), *mode)

	var rec *recorder
	if cfg.recordFile != "" {
		if rec, err = openRecorder(cfg.recordFile); err != nil {
			logf("record: %v", err)
			os.Exit(1)
		}
	}
	term := make(chan struct{}) // closed at the first SIGTERM when trapped
	if cfg.trapsTerm() {
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM)
		go func() {
			first := true
			for s := range sigs {
				logf("ignoring %v", s)
				if first {
					close(term)
					first = false
				}
			}
		}()
	}
	if cfg.hogMiB > 0 {
		hog = make([]byte, cfg.hogMiB<<20)
		for i := 0; i < len(hog); i += 4096 {
			hog[i] = 1
		}
		logf("hog: touched %d MiB", cfg.hogMiB)
	}
	if cfg.grandchild {
		if err := startGrandchild(true); err != nil {
			logf("grandchild: %v", err)
			os.Exit(1)
		}
	}
	if cfg.groupChild {
		if err := startGrandchild(false); err != nil {
			logf("groupchild: %v", err)
			os.Exit(1)
		}
	}
	if cfg.mortalChild {
		if err := startGrandchild(false, mortalArg); err != nil {
			logf("mortal-child: %v", err)
			os.Exit(1)
		}
	}

	a := newAgent(cfg, os.Stdout)
	a.rec, a.term = rec, term
	err = a.serve(os.Stdin)
	if err != nil && !errors.Is(err, io.EOF) {
		logf("read stdin: %v", err)
	}
	if cfg.trapsTerm() {
		logf("stdin closed; trapped SIGTERM keeps running")
		sleepForever()
	}
	logf("stdin closed, exiting")
	os.Exit(0)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faultagent: "+format+"\n", args...)
}

// hog keeps the memory of mode hog reachable for the process lifetime.
var hog []byte

// startGrandchild re-execs this binary (under a new session when setsid)
// as a process that ignores SIGTERM and sleeps forever, and returns once
// the grandchild reports (one byte on an inherited pipe) that SIGTERM is
// ignored. Its stdio is /dev/null, so it holds none of our pipes.
func startGrandchild(setsid bool, extra ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(self, append([]string{grandchildFlag}, extra...)...)
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the grandchild
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	go func() { _ = cmd.Wait() }() // reap it if it ever dies while we live
	var b [1]byte
	if _, err := r.Read(b[:]); err != nil {
		return fmt.Errorf("grandchild %d not ready: %w", cmd.Process.Pid, err)
	}
	logf("grandchild pid=%d (setsid %v, ignores SIGTERM)", cmd.Process.Pid, setsid)
	return nil
}

// grandchildMain is the body of the re-exec'ed grandchild.
func grandchildMain() {
	if len(os.Args) < 3 || os.Args[2] != mortalArg {
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	}
	ready := os.NewFile(3, "ready")
	if ready != nil {
		_, _ = ready.Write([]byte{1})
		ready.Close()
	}
	sleepForever()
}

// sleepForever blocks until the process is killed (a bare select{} would
// trip the runtime's deadlock detector when no other goroutine exists).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// readLines calls fn for each newline-terminated line of r (and a final
// unterminated one), with no limit on line length. It returns io.EOF at the
// end of input, or the read error.
func readLines(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			fn(line)
		}
		if err != nil {
			return err
		}
	}
}
