// Package guardian is the guardian program: a tiny re-execution of the
// sidecar binary that sits between the sidecar and ONE provider, in the
// reaper's subreaper and process-group (its alias) containment modes
// (internal/reaper; cgroup mode has no guardian, see its
// watchdog_linux.go). The reaper's Supervisor starts it as
// [Options.GuardianPath, Arg]; that binary's main hands it over to Main
// through the re-exec dispatch (launchexec.MaybeRun with reaper.Entries)
// first thing. A provider with a sandbox is forked through the launch
// entry (internal/launchexec), which applies it before the agent runs.
//
// What catches what (docs/operations.md, "When the sidecar dies", has the
// same for operators):
//
//	event                         subreaper / process-group
//	----------------------------  ---------------------------------------------
//	provider exits on its own     guardian reaps it, reports status; orphaned
//	                              descendants re-parent to the guardian (it is
//	                              a child subreaper) and are reaped + reported
//	Terminate                     guardian (asked over its control pipe):
//	                              TERM/KILL to the pinned group and, via pidfd,
//	                              to every live process that has the guardian
//	                              as ancestor; proof = guardian has no child left
//	sidecar SIGKILLed / crashes   control pipe EOF -> guardian: TERM tree,
//	                              250 ms grace, KILL, reap all, exit. Measured
//	                              by the TestSidecarKilled_* tests.
//	guardian SIGKILLed            its children re-parent to the sidecar (also a
//	(sidecar alive)               child subreaper); the Tree falls back to the
//	                              sidecar-side kill algorithm (reaper's
//	                              kill_linux.go):
//	                              /proc tracking and every live non-guardian
//	                              child of the sidecar attributed to the tree,
//	                              via pinned pidfds; empty = two clean passes a
//	                              reap cycle apart.
//	sidecar AND guardian killed   the tree re-parents to init and only the
//	together                      ownership ledger (leader pid + start time,
//	                              marker) can find it. NOT covered here. The
//	                              guardian is in its own process group, so a
//	                              group signal aimed at the sidecar does not
//	                              reach it.
//
// Why not PR_SET_PDEATHSIG: it fires when the forking OS thread exits
// (golang/go#27505), and even done right it covers only the direct child,
// not setsid'd grandchildren.
//
// Wire protocol (private to this package; JSON lines):
//
//	fd 0,1,2  provider stdin/stdout/stderr (handed on at fork, then replaced
//	          by /dev/null in the guardian, so ACP bytes never pass through it)
//	fd 3      control pipe, sidecar -> guardian: one Spec line, then
//	          Cmd lines ("term", "kill"); EOF = sidecar gone
//	fd 4      status pipe, guardian -> sidecar: Event lines
//	fd 5      the ExecFile (if any), then a network namespace the sandbox
//	          plan joins (if any; Spec.NetNSFD)
//
// The guardian's environment is the provider's (Spec.Env); it passes it on
// unchanged and never writes it anywhere.
package guardian

// Arg is the os.Args[1] of a guardian process: the reaper's Supervisor
// starts each guardian as [Options.GuardianPath, Arg].
const Arg = "__guardian"
