// Command acpx-sidecar is the sidecar daemon: a host spawns it and speaks
// JSON-RPC 2.0 over its stdin/stdout (docs/protocol.md); it launches ACP
// agents, runs their turns and proves each closed provider tree gone. Logs go
// to stderr as JSON lines. `acpx-sidecar doctor` prints the containment
// mechanisms this machine offers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acpx-sidecar/acpx-sidecar/internal/adapter"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launchexec"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
	"github.com/acpx-sidecar/acpx-sidecar/internal/rpc"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func main() {
	// First, before any flag parsing: the re-exec entries. A Supervisor
	// re-executes this binary as each provider's guardian or its watchdog
	// (`acpx-sidecar __guardian`), and as the launch entry that joins a
	// provider's limit cgroups and applies its sandbox before the agent
	// runs (`acpx-sidecar __launch`); such a process runs that entry and
	// exits inside MaybeRun.
	if launchexec.MaybeRun(reaper.Entries()) {
		return
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("acpx-sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.framing, "framing", "ndjson", "host framing: ndjson or lsp")
	fs.IntVar(&o.maxFrame, "max-frame-bytes", rpc.DefaultMaxFrameBytes, "largest inbound host frame, bytes")
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "default stateDir for session records (absolute)")
	o.inheritEnv = protocol.InheritMinimal
	fs.Var(&inheritEnvFlag{&o.inheritEnv, &o.inheritEnvOld}, "inherit-env", "what providers take from the sidecar's environment: minimal (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TZ, TMPDIR), all or none (docs/protocol.md §18.1)")
	o.limits.register(fs)
	d, c := config.DefaultBounds(), config.DefaultCaps() // the flags' defaults, each stated once (docs/rules.md#bounds)
	fs.Int64Var(&o.bounds.handshakeMs, "handshake-timeout-ms", d.HandshakeTimeout.Milliseconds(), "default handshake bound, ms (docs/rules.md#bounds)")
	fs.Int64Var(&o.bounds.closeMs, "close-timeout-ms", d.CloseTimeout.Milliseconds(), "ACP session/close bound, ms")
	fs.Int64Var(&o.bounds.termMs, "term-grace-ms", d.TermGrace.Milliseconds(), "wait after SIGTERM, ms")
	fs.Int64Var(&o.bounds.killMs, "kill-grace-ms", d.KillGrace.Milliseconds(), "wait after SIGKILL, ms")
	fs.Int64Var(&o.bounds.shutdownMs, "shutdown-ms", 0, fmt.Sprintf("shutdown bound, ms (0: close+term+kill+1000, %d with the defaults)", d.Shutdown.Milliseconds()))
	fs.StringVar(&o.isolation.containment, "containment", "auto", "auto, cgroup, subreaper, process-group (an alias of subreaper) or process-table (the macOS mode; docs/operations.md)")
	fs.StringVar(&o.isolation.cgroupParent, "cgroup-parent", "", "cgroup v2 directory under which provider cgroups are made (default: auto)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&o.caps.maxProvLine, "max-provider-line-bytes", c.MaxProviderLineBytes, "largest provider stdout line, bytes")
	fs.IntVar(&o.bounds.closeAttempts, "protocol-close-attempts", d.ProtocolCloseAttempts, "ACP session/close attempts per target (1 + retries)")
	fs.Int64Var(&o.bounds.retryMinMs, "retained-retry-min-ms", d.RetainedRetryMin.Milliseconds(), "retained cleanup backoff start, ms")
	fs.Int64Var(&o.bounds.retryMaxMs, "retained-retry-max-ms", d.RetainedRetryMax.Milliseconds(), "retained cleanup backoff cap, ms")
	fs.IntVar(&o.bounds.lateReconcile, "late-close-reconcile-attempts", -1, "deprecated and ignored: a late session's close is bounded by --retained-close-window-ms, not a count")
	fs.Int64Var(&o.bounds.lateWindowMs, "retained-close-window-ms", d.RetainedCloseWindow.Milliseconds(), "ACP session/close of a session created after its admission was given up: failures retried with backoff for no count within this, ms")
	fs.IntVar(&o.caps.maxQueued, "max-queued-turns", c.MaxQueuedTurns, "queue: true prompts that may wait behind a session's active turn (docs/protocol.md §8)")
	fs.Int64Var(&o.caps.journalMax, "journal-max-bytes", c.JournalMaxBytes, "size at which a session journal segment is rotated, bytes; 4 segments are kept (docs/protocol.md §16)")
	fs.IntVar(&o.caps.maxAsks, "max-pending-asks", c.MaxPendingAsks, "permission asks and elicitations of one turn that may wait for the host; more are decided as nonInteractivePermissions says, or answered cancel (docs/protocol.md §20, §22)")
	fs.IntVar(&o.caps.maxAskBytes, "max-pending-ask-bytes", c.MaxPendingAskBytes, "bytes of the asks of one turn that may wait for the host (docs/protocol.md §20)")
	fs.Int64Var(&o.caps.stateReadMs, "state-read-ms", c.StateRead.Milliseconds(), "how long session/status waits for a busy session before it answers from the session's snapshot, ms (docs/protocol.md §20)")
	fs.StringVar(&o.isolation.defaultSandbox, "default-sandbox", sandbox.Workspace, "kernel sandbox of an open that names none: workspace, strict or off; a default this machine cannot enforce is reported (sandbox.enforced false), not fatal (docs/protocol.md §19)")
	fs.IntVar(&o.isolation.assumeABI, "assume-landlock-abi", -1, "treat the kernel as offering at most this Landlock ABI (0: none); for testing how opens are refused (-1: the kernel's)")
	fs.IntVar(&o.caps.maxSessions, "max-sessions", 0, "live sessions admitted at once; more are refused SIDECAR_AT_CAPACITY (0: derived from the descriptor limit; docs/protocol.md §21)")
	fs.IntVar(&o.caps.maxLiveTrees, "max-live-trees", 0, "provider trees alive at once; an open or revive beyond it waits (FIFO) up to its reviveWaitMs, then is SIDECAR_AT_CAPACITY (0: --max-sessions; docs/protocol.md §24)")
	fs.Int64Var(&o.sweepMs, "sweep-interval-ms", config.DefaultSweepInterval.Milliseconds(), "how often a running sidecar sweeps its state dirs' ledgers for the leftovers of sidecars that died (0: only at start and first use), ms")
	o.state.register(fs)
	o.isolation.pins = egress.Pins{}
	fs.Func("resolve", "NAME=IP, repeatable: the address a tree with sandbox.network.allow reaches when it connects to the listed name NAME, never asked of the host's resolver (docs/protocol.md §19.1)", o.isolation.pins.ParsePin)
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	// A bad flag is one line on stderr (run prints it), not the whole usage;
	// -h prints the usage.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, "Usage:\n  acpx-sidecar [flags]         serve JSON-RPC 2.0 on stdin/stdout (docs/protocol.md)\n"+
				"  acpx-sidecar doctor [flags]  print, as JSON, what containment and sandbox this machine offers, and why\n"+
				"  acpx-sidecar --version\n\nFlags (both forms):\n")
			fs.PrintDefaults()
			return nil, err
		}
		return nil, fmt.Errorf("%v (acpx-sidecar -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.framing != "ndjson" && o.framing != "lsp":
		return nil, fmt.Errorf("--framing must be ndjson or lsp")
	case o.maxFrame < 1024:
		return nil, fmt.Errorf("--max-frame-bytes must be at least 1024")
	case o.stateDir != "" && !filepath.IsAbs(o.stateDir):
		return nil, fmt.Errorf("--state-dir must be absolute")
	case o.bounds.handshakeMs < 1 || o.bounds.handshakeMs > protocol.MaxHandshakeTimeoutMs:
		return nil, fmt.Errorf("--handshake-timeout-ms must be 1-%d", protocol.MaxHandshakeTimeoutMs)
	case o.bounds.closeMs < 1 || o.bounds.termMs < 1 || o.bounds.killMs < 1:
		return nil, fmt.Errorf("--close-timeout-ms, --term-grace-ms and --kill-grace-ms must be positive")
	case o.bounds.shutdownMs < 0:
		return nil, fmt.Errorf("--shutdown-ms must not be negative")
	case o.bounds.closeAttempts < 1 || o.bounds.lateWindowMs < 1:
		return nil, fmt.Errorf("--protocol-close-attempts and --retained-close-window-ms must be at least 1")
	case o.bounds.retryMinMs < 1 || o.bounds.retryMaxMs < o.bounds.retryMinMs:
		return nil, fmt.Errorf("--retained-retry-min-ms must be positive and at most --retained-retry-max-ms")
	case o.caps.maxQueued < 0 || o.caps.maxQueued > 10000:
		return nil, fmt.Errorf("--max-queued-turns must be 0-10000")
	case o.caps.journalMax < 4096:
		return nil, fmt.Errorf("--journal-max-bytes must be at least 4096")
	case o.caps.maxAsks < 1 || o.caps.maxAskBytes < 1024:
		return nil, fmt.Errorf("--max-pending-asks must be positive and --max-pending-ask-bytes at least 1024")
	case o.caps.stateReadMs < 1 || o.caps.stateReadMs > 60000:
		return nil, fmt.Errorf("--state-read-ms must be 1-60000")
	}
	if err := checkMaxSessions(o.caps.maxSessions); err != nil {
		return nil, err
	}
	if o.sweepMs < 0 || (o.sweepMs > 0 && o.sweepMs < 100) {
		return nil, fmt.Errorf("--sweep-interval-ms must be 0 (off) or at least 100")
	}
	if o.caps.maxLiveTrees < 0 {
		return nil, fmt.Errorf("--max-live-trees must be 0 (--max-sessions) or positive")
	}
	if err := o.state.check(); err != nil {
		return nil, err
	}
	if err := o.limits.check(); err != nil {
		return nil, err
	}
	if o.bounds.shutdownMs == 0 {
		o.bounds.shutdownMs = config.ShutdownFor(ms(o.bounds.closeMs), ms(o.bounds.termMs), ms(o.bounds.killMs)).Milliseconds()
		if o.state.url != "" {
			// Shutdown publishes every live session's provider state
			// (docs/protocol.md §24): time for that too.
			o.bounds.shutdownMs += config.ShutdownPublishAllowance.Milliseconds()
		}
	}
	switch o.isolation.containment {
	case "auto", "cgroup", "subreaper", "process-group", "process-table":
	default:
		return nil, fmt.Errorf("--containment must be auto, cgroup, subreaper, process-group or process-table")
	}
	switch o.isolation.defaultSandbox {
	case sandbox.Workspace, sandbox.Strict, sandbox.Off:
	default:
		return nil, fmt.Errorf("--default-sandbox must be workspace, strict or off")
	}
	if o.isolation.assumeABI < -1 {
		return nil, fmt.Errorf("--assume-landlock-abi must be -1 or more")
	}
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	return o, nil
}

func defaultStateDir() string {
	// A relative $HOME cannot be found either (docs/protocol.md §2): the
	// default is then empty, not a relative directory blamed on a flag the
	// operator never passed.
	if d, err := os.UserHomeDir(); err == nil && filepath.IsAbs(d) {
		return filepath.Join(d, ".acpx-sidecar")
	}
	return ""
}

func newLogger(level string, w io.Writer) *zap.Logger {
	var lvl zapcore.Level
	_ = lvl.UnmarshalText([]byte(level))
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = func(t time.Time, e zapcore.PrimitiveArrayEncoder) { e.AppendString(protocol.FormatTime(t)) }
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "doctor" {
		o, err := parseFlags(args[1:], stderr)
		if err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			fmt.Fprintln(stderr, "acpx-sidecar doctor:", err)
			return 2
		}
		return doctor(stdout, o)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, "acpx-sidecar:", err)
		return 2
	}
	if o.printVersion {
		fmt.Fprintln(stdout, "acpx-sidecar", buildinfo.Version())
		return 0
	}
	log := newLogger(o.logLevel, stderr)
	defer func() { _ = log.Sync() }()
	stateStore, storeCreds, err := o.state.openWithCredentials(context.Background())
	if err != nil {
		fmt.Fprintln(stderr, "acpx-sidecar:", err)
		return 2
	}

	mode := reaper.Mode("")
	if o.isolation.containment != "auto" {
		mode = reaper.Mode(o.isolation.containment)
	}
	sup, launcher, err := startContainment(mode, o.isolation.cgroupParent, log)
	switch {
	case err != nil && mode != "":
		// A containment the host asked for by flag is a bad flag here.
		fmt.Fprintln(stderr, "acpx-sidecar: --containment "+o.isolation.containment+" is unavailable:", err)
		return 2
	case err != nil:
		// Serve anyway: every open is refused before launch with
		// PLATFORM_UNSUPPORTED (docs/rules.md#r2).
		log.Error("no containment available; opens will be refused", zap.Error(err))
	}
	if err := checkDefaultLimits(o.limits, modeOf(sup)); err != nil {
		// Limits the operator asked for by flag and the machine cannot
		// enforce are a bad flag, like a forced --containment.
		fmt.Fprintln(stderr, "acpx-sidecar:", err)
		if sup != nil {
			_ = sup.Close()
		}
		return 2
	}
	// SIGPIPE on stdout must not kill us before providers are cleaned up;
	// Notify (not Ignore) keeps providers' default disposition.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigs)

	// Exit watchdog: if shutdown cannot finish (a host that stopped reading
	// stdout blocks every write), exit anyway after its bound plus a margin;
	// every guardian sees its owner pipe close and kills its tree.
	watchdog := func() {
		time.AfterFunc(ms(o.bounds.shutdownMs)+5*time.Second, func() {
			log.Error("shutdown did not finish in time; exiting (guardians end the provider trees)")
			_ = log.Sync()
			killTablesBeforeExit(sup)
			os.Exit(1)
		})
	}
	server := rpc.NewServer(rpc.Options{In: stdin, Out: stdout, Framing: rpc.Framing(o.framing), MaxFrameBytes: o.maxFrame,
		Logger: log.Named("rpc"), OnShutdown: watchdog})
	cfg := config.DefaultConfig()
	cfg.StateDir = o.stateDir
	if cfg.StateDir != "" {
		cfg.StateDir = filepath.Clean(cfg.StateDir) // one spelling per directory, as for an open's stateDir
	}
	cfg.Bounds = config.Bounds{HandshakeTimeout: ms(o.bounds.handshakeMs), CloseTimeout: ms(o.bounds.closeMs),
		TermGrace: ms(o.bounds.termMs), KillGrace: ms(o.bounds.killMs), Shutdown: ms(o.bounds.shutdownMs),
		ProtocolCloseAttempts: o.bounds.closeAttempts, RetainedRetryMin: ms(o.bounds.retryMinMs), RetainedRetryMax: ms(o.bounds.retryMaxMs),
		RetainedCloseWindow: ms(o.bounds.lateWindowMs)}
	cfg.Caps = config.Caps{MaxQueuedTurns: o.caps.maxQueued, MaxPendingAsks: o.caps.maxAsks, MaxPendingAskBytes: o.caps.maxAskBytes,
		StateRead: ms(o.caps.stateReadMs), MaxProviderLineBytes: o.caps.maxProvLine, JournalMaxBytes: o.caps.journalMax,
		MaxSessions: o.caps.maxSessions}
	if o.caps.maxQueued == 0 {
		cfg.Caps.MaxQueuedTurns = -1 // no queue: every queue: true prompt behind a turn is TURN_ACTIVE
	}
	cfg.Launcher = launcher
	nofile, err := raiseNofile()
	if err != nil {
		log.Warn("the descriptor limit could not be raised to its hard limit", zap.Error(err))
	}
	if o.caps.maxSessions == 0 && nofile > 0 {
		cfg.Caps.MaxSessions = maxSessionsFor(nofile)
	}
	cfg.Caps.MaxLiveTrees = o.caps.maxLiveTrees
	if cfg.Caps.MaxLiveTrees == 0 {
		cfg.Caps.MaxLiveTrees = cfg.Caps.MaxSessions
	}
	cfg.StateStore = stateStore
	cfg.StateSecrets = o.state.secretPaths()
	cfg.SweepInterval = ms(o.sweepMs)
	cfg.Logger = log.Named("session")
	environ := os.Environ()
	// The store's credential variables never reach an agent from here,
	// and their values are redacted like env secrets (docs/protocol.md
	// §24).
	cfg.Env = admission.ProviderEnv{Base: admission.Withhold(admission.InheritedEnv(o.inheritEnv, environ), storeCreds.Env),
		Policy: o.inheritEnv, Sidecar: environ, Withheld: storeCreds.Env, StoreSecrets: storeCreds.Values}
	cfg.DefaultLimits = o.limits.defaults()
	cfg.LimitsSupported = cgroup.LimitsSupported
	cfg.Sandbox = admission.SandboxConfig{Default: o.isolation.defaultSandbox, Caps: sandbox.Probe().Limit(o.isolation.assumeABI),
		Protected: append(sandbox.CgroupMounts(), selfInstallation()...), StoreDir: o.state.fileRoot(), Secrets: o.state.keyPaths()}
	cfg.Egress = config.EgressConfig{Pins: o.isolation.pins, Unsupported: egress.Probe()}
	if nofile > 0 {
		cfg.Egress.MaxConnections = maxConnectionsFor(nofile)
	}
	if cfg.Egress.Unsupported != nil {
		log.Info("sandbox.network.allow cannot be enforced here; opens with an allow list are refused PLATFORM_UNSUPPORTED",
			zap.String("reason", cfg.Egress.Unsupported.Error()))
	}
	if sup != nil {
		sc := admission.SandboxCaps(cfg.Sandbox.Caps, o.isolation.defaultSandbox, sup.Mode(), cfg.Egress.Unsupported)
		if sc.Default != o.isolation.defaultSandbox {
			log.Warn("the default sandbox cannot be enforced here; opens that name none run unsandboxed and say so (sandbox.enforced false)",
				zap.String("defaultSandbox", o.isolation.defaultSandbox), zap.Int("landlockAbi", sc.LandlockABI), zap.String("reason", sc.Reason))
		} else if sc.Default != sandbox.Off && !sc.Processes {
			log.Warn("sandboxed trees cannot get a PID namespace of their own here; they run with processes all and say so (sandbox.processes, sandbox.reason)",
				zap.String("reason", sc.ProcessesReason))
		}
	}
	if o.bounds.lateReconcile >= 0 {
		log.Warn("--late-close-reconcile-attempts is deprecated and ignored: a late session's ACP close is retried within --retained-close-window-ms (docs/rules.md#r20)")
	}
	if o.inheritEnvOld != "" {
		log.Warn("--inherit-env=" + o.inheritEnvOld + " is the old boolean spelling; it means --inherit-env=" + o.inheritEnv)
	}
	startupChecks(log, o.stateDir) // startchecks.go
	mgr := adapter.NewManager(cfg, server)
	log.Info("acpx-sidecar started", zap.Int("pid", os.Getpid()), zap.String("containment", initContainment(sup)),
		zap.String("framing", o.framing), zap.Int("maxSessions", cfg.Caps.MaxSessions))

	stopSignals := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGPIPE {
					continue
				}
				log.Info("signal: shutting down", zap.String("signal", sig.String()))
				server.Stop()
			case <-stopSignals:
				return
			}
		}
	}()
	code := server.Serve(mgr)
	close(stopSignals)
	mgr.Wait()
	if sup != nil {
		sup.Seal()
		if err := sup.Close(); err != nil {
			log.Warn("supervisor close", zap.Error(err))
		}
	}
	log.Info("acpx-sidecar exiting", zap.Int("status", code))
	return code
}

// doctor prints which containment mechanisms this machine offers and why,
// the --inherit-env policy the given flags set and the names it passes,
// which kinds of limits (docs/protocol.md §18.2) this machine can
// enforce, and what its kernel sandbox enforces (docs/protocol.md §19),
// all for the containment the flags choose: the first available one under
// --containment auto, else the one asked for ("" when it is unavailable:
// exit 1, as the daemon would exit 2 on that flag). The checks are the
// daemon's: --cgroup-parent (reaper.CheckCgroupParent; under auto an
// unusable one falls back to the next mode) and the --default-* limits
// (checkDefaultLimits: exit 1). "problems" lists why, one sentence each,
// and whether --state-store can be reached now (a store that cannot is a
// problem, but the daemon starts: exit 0).
func doctor(stdout io.Writer, o *options) int {
	mechs := append(reaper.Detect(), tablemode.Detect())
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	chosen := ""
	problems := []string{}
	for _, m := range mechs {
		if !m.Available || (o.isolation.containment != "auto" && o.isolation.containment != string(m.Mode)) {
			continue
		}
		if m.Mode == reaper.ModeCgroup {
			// The daemon's --cgroup-parent check (startContainment): under
			// auto an unusable parent falls back to the next mode.
			if err := reaper.CheckCgroupParent(o.isolation.cgroupParent); err != nil {
				problems = append(problems, "--containment cgroup is unavailable: "+err.Error())
				continue
			}
		}
		chosen = string(m.Mode)
		break
	}
	usable := chosen != ""
	if usable {
		if err := checkDefaultLimits(o.limits, reaper.Mode(chosen)); err != nil {
			problems = append(problems, err.Error()) // the daemon exits 2
			usable = false
		}
	}
	if unreachable, err := o.state.preflight(); err != nil {
		problems = append(problems, err.Error()) // the daemon exits 2
		usable = false
	} else if unreachable != nil {
		// The daemon starts (opens that need the store fail retryable
		// until it answers), so this alone does not make doctor exit 1.
		problems = append(problems, "--state-store cannot be reached now: "+unreachable.Error())
	}
	sc := admission.SandboxCaps(sandbox.Probe().Limit(o.isolation.assumeABI), o.isolation.defaultSandbox, reaper.Mode(chosen), egress.Probe())
	_ = enc.Encode(map[string]any{"containment": chosen, "mechanisms": mechs,
		"inheritEnv": doctorEnv(o.inheritEnv, statestore.CredentialEnv(o.state.url)), "limits": doctorLimits(chosen),
		"sandbox": sc, "problems": problems})
	if !usable {
		return 1
	}
	return 0
}

func initContainment(sup containment) string {
	if sup == nil {
		return "none"
	}
	return string(sup.Mode())
}

// selfInstallation is this binary's own installation as the sandbox keeps
// it read-only (sandbox.Installation: the executable and the outermost
// node_modules it lies in, e.g. a Node host's @acpx-sidecar/linux-x64):
// an agent that could replace it would have its program run, unsandboxed,
// by the next sidecar started from that path (docs/protocol.md §19).
func selfInstallation() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return sandbox.Installation(exe, nil, "")
}

// ms is n milliseconds, as the flags give their bounds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
