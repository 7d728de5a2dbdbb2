package session

import "github.com/acpx-sidecar/acpx-sidecar/internal/registry"

// Spare private TMPDIRs and the spare files of the stores are made ahead
// of need by internal/registry (TmpSpares, SpareRefills); a sandboxed open
// takes one in launch.SetupSandbox.

// refillSpares asks for the session's store's spare files and, when the
// session got a private TMPDIR, the Manager's spare TMPDIRs to be
// refilled: called once the open is answered, when their creates no
// longer delay it.
func (s *Actor) refillSpares() {
	var tmp *registry.TmpSpares
	if s.end.tmpDir != "" { // only a sidecar that makes private TMPDIRs keeps spares of them
		tmp = s.m.TmpSpares
	}
	s.m.Refills.Request(s.rec.st, tmp)
}
