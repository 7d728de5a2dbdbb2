package protocol

import (
	"encoding/json"
	"path/filepath"
)

// Methods of the session journal and the sidecar's counters
// (docs/protocol.md §16, §17).
const (
	MethodSessionEvents = "session/events"
	MethodSidecarStats  = "sidecar/stats"
)

// DefaultMaxQueuedTurns is how many `queue: true` prompts may wait behind
// a session's active turn unless --max-queued-turns says otherwise
// (docs/protocol.md §8 session/prompt, Queued turns).
const DefaultMaxQueuedTurns = 16

// EventsParams are the params of `session/events`: the journal of
// SessionKey in StateDir (absolute; default --state-dir), the entries
// after entry number AfterN (default 0: every session of the key), or —
// with AfterSeq or Session — the entries of Session (default the latest)
// after seq AfterSeq (0 = from its start), at most Limit of them (default
// 1000, at most 10000; docs/protocol.md §16).
type EventsParams struct {
	// SessionKey is the key whose journal is read; required, checked as
	// session/open checks it. No session of the key needs to be open.
	SessionKey string `json:"sessionKey"`
	// StateDir is the absolute state directory holding the journal
	// (cleaned by Validate); empty means --state-dir.
	StateDir string `json:"stateDir,omitempty"`
	// AfterN reads by entry number: the entries with an n greater than it,
	// of every session of the key. Nil means 0 (from the first entry) when
	// AfterSeq and Session are absent too; not allowed with either.
	AfterN *int64 `json:"afterN,omitempty"`
	// Session picks the session whose entries a read by seq returns (at
	// most 256 bytes); empty means the latest session (the last entry's).
	Session string `json:"session,omitempty"`
	// AfterSeq reads by seq: the entries of Session with a seq greater
	// than it; 0 means all of them, also those before its first update.
	// Nil with Session set reads from 0.
	AfterSeq *int64 `json:"afterSeq,omitempty"`
	// Limit caps the entries returned, 1–10000; nil means 1000. A read by
	// seq never splits one seq's entries, so its page may hold more.
	Limit *int `json:"limit,omitempty"`
}

// Validate checks EventsParams: a sessionKey as session/open requires,
// an absolute stateDir, afterSeq ≥ 0, a limit of 1–10000.
func (p *EventsParams) Validate() *Error {
	if e := checkID("sessionKey", p.SessionKey, MaxSessionKeyBytes); e != nil {
		return e
	}
	if p.StateDir != "" && !filepath.IsAbs(p.StateDir) {
		return InvalidParams("stateDir", "stateDir must be absolute")
	}
	if p.StateDir != "" {
		p.StateDir = filepath.Clean(p.StateDir) // as OpenParams.Validate
	}
	if p.AfterSeq != nil && *p.AfterSeq < 0 {
		return InvalidParams("afterSeq", "afterSeq must be 0 or more")
	}
	if p.AfterN != nil && *p.AfterN < 0 {
		return InvalidParams("afterN", "afterN must be 0 or more")
	}
	if p.AfterN != nil && (p.AfterSeq != nil || p.Session != "") {
		return InvalidParams("afterN", "afterN pages the whole key; afterSeq and session page one session: give one or the other")
	}
	if len(p.Session) > 256 {
		return InvalidParams("session", "session is at most 256 bytes")
	}
	if p.Limit != nil && (*p.Limit < 1 || *p.Limit > 10000) {
		return InvalidParams("limit", "limit must be 1–10000")
	}
	return nil
}

// EventsResult is the result of `session/events`. Each event is one
// journal entry {"n","session","seq","method","params","at"} verbatim;
// NextN is the afterN of the next call by n, NextSeq the afterSeq of the
// next call by seq; Gaps are the ranges of n the answer's range lacks,
// Complete is true only when there are none and nothing was truncated;
// Truncated says wanted entries were rotated away.
type EventsResult struct {
	// Events are the journal entries read, oldest first, each a whole
	// journal line as written; never null (empty when there are none).
	Events []json.RawMessage `json:"events"`
	// NextN is the n of the last entry returned (the afterN asked, or 0,
	// when there is none): the afterN of the next read by n.
	NextN uint64 `json:"nextN"`
	// NextSeq is the seq of the last entry returned (the afterSeq asked
	// when there is none): the afterSeq of the next read by seq.
	NextSeq uint64 `json:"nextSeq"`
	// Gaps are the ranges of entry numbers the answer's range lacks
	// (a gap entry's, rotated away, missing); never null.
	Gaps []JournalGap `json:"gaps"`
	// Complete is true only when Gaps is empty and Truncated is false.
	Complete bool `json:"complete"`
	// Truncated is true when entries that were asked for had already been
	// dropped by rotation.
	Truncated bool `json:"truncated"`
}

// ContextUsage is the agent's context-window use from its last ACP
// usage_update: Used and Size in tokens (docs/protocol.md §8
// session/status `usage.context`).
type ContextUsage struct {
	// Used is the tokens of the context window in use.
	Used int64 `json:"used"`
	// Size is the context window's size in tokens.
	Size int64 `json:"size"`
}

// StatsSessions counts this sidecar's sessions by state (admitting ones
// are not counted; closed ones until they are retired).
type StatsSessions struct {
	// Open counts sessions in state open (idle, no turn running).
	Open int `json:"open"`
	// Turn counts sessions in state turn (a turn running).
	Turn int `json:"turn"`
	// Closing counts sessions in state closing (a close or shutdown
	// running their cleanup).
	Closing int `json:"closing"`
	// Closed counts sessions in state closed, until they are retired.
	Closed int `json:"closed"`
	// Dead counts sessions in state dead (their provider died on its
	// own), until they are retired.
	Dead int `json:"dead"`
	// Retiring, Parked and Reviving count per-turn (and idle-retired warm)
	// sessions by their tree's state (docs/protocol.md §24).
	Retiring int `json:"retiring"`
	// Parked counts sessions whose tree was retired and not yet revived.
	Parked int `json:"parked"`
	// Reviving counts parked sessions whose tree is being launched again.
	Reviving int `json:"reviving"`
}

// StatsTurns: Running and Queued are current; Completed, Failed and
// Cancelled count the turns answered since the sidecar started (queued
// turns cancelled before they started count as cancelled).
type StatsTurns struct {
	// Running is the turns running now: the sessions in state turn.
	Running int `json:"running"`
	// Queued is the `queue: true` prompts waiting now behind an active
	// turn.
	Queued int `json:"queued"`
	// Completed counts the turns answered with status completed.
	Completed uint64 `json:"completed"`
	// Failed counts the turns answered with status failed.
	Failed uint64 `json:"failed"`
	// Cancelled counts the turns answered with status cancelled, queued
	// ones cancelled before they started included.
	Cancelled uint64 `json:"cancelled"`
}

// StatsProofs counts the cleanup proofs of this sidecar: Complete and
// Incomplete the first proof of each cleanup (a close's answer, an
// admission's, a provider exit's, shutdown's), Retained the cleanups
// being retried now, Recovered the leftovers of earlier sidecars proven
// gone.
type StatsProofs struct {
	// Complete counts the cleanups whose first proof was complete.
	Complete uint64 `json:"complete"`
	// Incomplete counts the cleanups whose first proof was incomplete.
	Incomplete uint64 `json:"incomplete"`
	// Retained is the cleanups being retried now (a gauge, not a count).
	Retained int `json:"retained"`
	// Recovered counts the leftover trees of earlier sidecars proven gone
	// (the `recovered` proofs).
	Recovered uint64 `json:"recovered"`
}

// Percentiles are p50/p99 in milliseconds (0 without samples).
type Percentiles struct {
	// P50 is the median in milliseconds (nearest rank).
	P50 float64 `json:"p50"`
	// P99 is the 99th percentile in milliseconds (nearest rank).
	P99 float64 `json:"p99"`
}

// StatsResult is the result of `sidecar/stats` (docs/protocol.md §17).
// UpdatesForwarded counts session/update notifications sent;
// UpdatesDropped the agents' session/updates that were not ACP
// SessionUpdates (no non-empty string sessionUpdate; docs/protocol.md
// §20), dropped;
// CloseToProofMs is over the last 1024 host closes, from the close
// request to its proof.
type StatsResult struct {
	// Sessions is this sidecar's sessions by state, as session/list
	// reports them.
	Sessions StatsSessions `json:"sessions"`
	// Turns is the turns running and queued now and those answered since
	// the sidecar started.
	Turns StatsTurns `json:"turns"`
	// UpdatesForwarded counts the session/update notifications sent to
	// the host since the sidecar started.
	UpdatesForwarded uint64 `json:"updatesForwarded"`
	// UpdatesDropped counts the agents' session/updates dropped since the
	// sidecar started for not being ACP SessionUpdates.
	UpdatesDropped uint64 `json:"updatesDropped"`
	// Proofs counts the cleanup proofs of this sidecar.
	Proofs StatsProofs `json:"proofs"`
	// CloseToProofMs is the time from a host's session/close request to
	// its proof, over the last 1024 of them.
	CloseToProofMs Percentiles `json:"closeToProofMs"`
	// LiveTrees: provider trees alive now (live-tree slots held), the
	// launches waiting for one, and --max-live-trees (docs/protocol.md §24).
	LiveTrees StatsLiveTrees `json:"liveTrees"`
	// Network: every session's connections through an allow list since
	// this sidecar started (docs/protocol.md §19.1).
	Network NetworkTotals `json:"network"`
}

// StatsLiveTrees is sidecar/stats `liveTrees`.
type StatsLiveTrees struct {
	// Live is the provider trees alive now (live-tree slots held).
	Live int `json:"live"`
	// Waiting is the opens and revives waiting now for a live-tree slot.
	Waiting int `json:"waiting"`
	// Max is --max-live-trees in force; omitted when there is no bound.
	Max int `json:"max,omitempty"`
}
