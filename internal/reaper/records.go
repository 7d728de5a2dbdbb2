//go:build linux || darwin

package reaper

import "golang.org/x/sys/unix"

// SignalFailedRecords is one CodeSignalFailed ErrorRecord per delivery
// error of sig, in order, each "<SIGNAME>: <error>": what a Terminate of
// any mode (this package's Tree, internal/reaper/tablemode's) appends to
// its proof's errors.
func SignalFailedRecords(sig unix.Signal, errs []string) []ErrorRecord {
	out := make([]ErrorRecord, 0, len(errs))
	for _, e := range errs {
		out = append(out, ErrorRecord{Code: CodeSignalFailed, Message: unix.SignalName(sig) + ": " + e})
	}
	return out
}
