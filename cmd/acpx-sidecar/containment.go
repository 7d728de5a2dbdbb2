package main

import (
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/tablemode"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
)

// containment is the supervisor in force: a *reaper.Supervisor (cgroup,
// subreaper, process-group) or a *tablemode.Supervisor (process-table).
type containment interface {
	Mode() reaper.Mode
	Seal()
	Close() error
}

// startContainment starts the containment asked for; "" (auto) takes the first
// that starts of cgroup, subreaper and process-group, then process-table — on
// macOS the only one (docs/operations.md, "macOS"). It returns the supervisor
// and the sessions' view of it (launch.Launcher); an error (and nils) when the
// mode asked for, or every mode, is unavailable.
func startContainment(mode reaper.Mode, cgroupParent string, log *zap.Logger) (containment, launch.Launcher, error) {
	rlog := log.Named("reaper")
	if mode == reaper.ModeProcessTable {
		return startTable(rlog)
	}
	sup, err := newSupervisor(reaper.Options{Mode: mode, CgroupParent: cgroupParent, Logger: rlog})
	if err == nil && mode == reaper.ModeProcessGroup {
		log.Info("containment process-group is an alias of subreaper: the same per-provider guardian")
	}
	if err != nil && mode == "" {
		// auto: the strongest mode failed to start (e.g. an unusable
		// --cgroup-parent); fall back to the next ones.
		for _, m := range []reaper.Mode{reaper.ModeSubreaper, reaper.ModeProcessGroup} {
			log.Warn("containment unavailable; trying the next mode", zap.Error(err), zap.String("next", string(m)))
			if sup, err = newSupervisor(reaper.Options{Mode: m, Logger: rlog}); err == nil {
				break
			}
		}
	}
	switch {
	case err == nil:
		return sup, launch.ReaperLauncher(sup), nil
	case mode != "":
		return nil, nil, err
	}
	if runtime.GOOS == "linux" {
		log.Warn("containment unavailable; trying the next mode", zap.Error(err), zap.String("next", string(reaper.ModeProcessTable)))
	}
	return startTable(rlog)
}

// newSupervisor makes this process a child subreaper, so that the tree of a
// guardian that gets killed re-parents to the sidecar, which reaps it and
// keeps containing it (reaper.BecomeSubreaper), then makes the Supervisor.
// A failure of either is a containment that is unavailable.
func newSupervisor(opts reaper.Options) (*reaper.Supervisor, error) {
	if err := reaper.BecomeSubreaper(); err != nil {
		return nil, err
	}
	return reaper.NewSupervisor(opts)
}

// startTable starts process-table containment, marking each tree with the
// session marker (session.SessionMarkerEnv) the ownership ledger records.
// On Linux the sidecar becomes a child subreaper first, so the orphans it
// kills are reaped with their exit status (the part launchd plays on
// macOS; tracking does not rely on it).
func startTable(log *zap.Logger) (containment, launch.Launcher, error) {
	if runtime.GOOS == "linux" {
		if err := reaper.BecomeSubreaper(); err != nil {
			log.Warn("not a child subreaper: orphans of killed trees are left to init to reap", zap.Error(err))
		}
	}
	ts, err := tablemode.New(tablemode.Options{MarkerName: session.SessionMarkerEnv, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return ts, launch.TableLauncher(ts), nil
}

// killTablesBeforeExit, on the way out of a shutdown that could not
// finish, SIGKILLs every tree of a process-table supervisor
// (tablemode.Supervisor.Close), bounded by 2 s: no guardian or watchdog would
// end them once this process is gone. Other modes need nothing here.
func killTablesBeforeExit(sup containment) {
	if modeOf(sup) != reaper.ModeProcessTable {
		return
	}
	done := make(chan struct{})
	go func() {
		_ = sup.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// modeOf is sup's mode, "" for none.
func modeOf(sup containment) reaper.Mode {
	if sup == nil {
		return ""
	}
	return sup.Mode()
}
