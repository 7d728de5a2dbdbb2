package adapter

import "github.com/acpx-sidecar/acpx-sidecar/protocol"

// Stats answers sidecar/stats (docs/protocol.md §17): sessions by state as
// session/list reports them (sessions still being admitted are not
// counted), turns running (sessions in state turn) and queued, and the
// counters since this sidecar started.
func (m *Manager) Stats() protocol.StatsResult {
	var res protocol.StatsResult
	for _, e := range m.List() {
		switch e.State {
		case protocol.StateOpen:
			res.Sessions.Open++
		case protocol.StateTurn:
			res.Sessions.Turn++
		case protocol.StateClosing:
			res.Sessions.Closing++
		case protocol.StateClosed:
			res.Sessions.Closed++
		case protocol.StateDead:
			res.Sessions.Dead++
		case protocol.StateRetiring:
			res.Sessions.Retiring++
		case protocol.StateParked:
			res.Sessions.Parked++
		case protocol.StateReviving:
			res.Sessions.Reviving++
		}
	}
	res.LiveTrees.Live, res.LiveTrees.Waiting = m.sh.Trees.Counts()
	res.LiveTrees.Max = max(m.sh.Trees.Max(), 0)
	res.Network = protocol.NetworkTotals(m.sh.NetTotals.Totals())
	m.sh.Stats.Fill(&res)
	res.Turns.Running = res.Sessions.Turn
	return res
}
