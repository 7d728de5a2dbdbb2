package rpc

// ShutdownRequested reports whether the host sent `shutdown`; false when
// the shutdown came from `exit` without it, stdin EOF, an unwritable
// stdout or Stop (a signal). The Manager (internal/adapter) then also
// sends the proofs the shutdown made as cleanup/proof, since no
// `shutdown` result carries them (docs/protocol.md §16, Proofs at
// shutdown). It implements
// internal/adapter's ShutdownRequester.
func (s *Server) ShutdownRequested() bool { return s.asked.Load() }
