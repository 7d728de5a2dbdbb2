package adapter

import (
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Capacity (docs/protocol.md §21): the Manager admits at most
// Config.Caps.MaxSessions live sessions (those holding their key: admitting,
// open, closing, or cleaned up by a retained retry), refusing the next
// with SIDECAR_AT_CAPACITY before anything is made; and an admission step
// that fails for want of descriptors, processes or memory is
// RESOURCE_EXHAUSTED (retryable, data.resource) with its proof, never a
// verdict on the host's input.

// atCapacityLocked returns the SIDECAR_AT_CAPACITY refusal when live sessions
// already fill Config.Caps.MaxSessions (≤ 0: no limit), else nil. Called under
// m.mu.
func (m *Manager) atCapacityLocked() *protocol.Error {
	max := m.sh.Config.Caps.MaxSessions
	if max <= 0 || len(m.keys) < max {
		return nil
	}
	e := protocol.Domain(protocol.ErrSidecarAtCapacity, "the sidecar holds its maximum of "+strconv.Itoa(max)+
		" live sessions (--max-sessions); retry after one closes", true)
	e.Data.Limit = &max
	return e
}
