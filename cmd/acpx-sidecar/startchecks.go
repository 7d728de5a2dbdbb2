package main

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// startupChecks logs one clear line for each condition of the sidecar's
// environment that would make later opens fail, or weaken what they get,
// while nothing has failed yet (issue 33; docs/operations.md "Start-up
// checks"): a TMPDIR that is relative or not an existing directory
// (sandboxed opens make their private TMPDIRs in it), a --state-dir that
// others may write (its ledger decides what a later sidecar kills), and a
// state dir filesystem without renameat2 RENAME_NOREPLACE (its lock and
// hold files are then made by plain creates). None of them stops the
// start.
func startupChecks(log *zap.Logger, stateDir string) {
	if v, ok := os.LookupEnv("TMPDIR"); ok && v != "" {
		switch fi, err := os.Stat(v); {
		case !filepath.IsAbs(v):
			log.Warn("TMPDIR is a relative path: sandboxed opens that need a private TMPDIR will fail PLATFORM_UNSUPPORTED; set it to an absolute directory",
				zap.String("TMPDIR", v))
		case err != nil || !fi.IsDir():
			log.Warn("TMPDIR is not an existing directory: sandboxed opens that need a private TMPDIR will fail PLATFORM_UNSUPPORTED; create it or set TMPDIR to one",
				zap.String("TMPDIR", v))
		}
	}
	if stateDir == "" {
		return
	}
	dir := stateDir
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Dir(dir) // made at first use: its parent decides
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o002 != 0 {
		log.Warn("the state directory (or the directory it will be made in) is writable by every user: anyone on this machine can plant ledger entries and records; use a directory only the sidecar's user can write",
			zap.String("dir", dir), zap.String("mode", fi.Mode().Perm().String()))
	}
	if why := renameNoReplaceMissing(dir); why != "" {
		log.Warn("the state directory's filesystem has no renameat2 RENAME_NOREPLACE: spare files are not used, and every open creates its lock and hold files (slower)",
			zap.String("dir", dir), zap.String("probe", why))
	}
}
