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
	SessionKey string `json:"sessionKey"`
	StateDir   string `json:"stateDir,omitempty"`
	AfterN     *int64 `json:"afterN,omitempty"`
	Session    string `json:"session,omitempty"`
	AfterSeq   *int64 `json:"afterSeq,omitempty"`
	Limit      *int   `json:"limit,omitempty"`
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
	Events    []json.RawMessage `json:"events"`
	NextN     uint64            `json:"nextN"`
	NextSeq   uint64            `json:"nextSeq"`
	Gaps      []JournalGap      `json:"gaps"`
	Complete  bool              `json:"complete"`
	Truncated bool              `json:"truncated"`
}

// ContextUsage is the agent's context-window use from its last ACP
// usage_update: Used and Size in tokens (docs/protocol.md §8
// session/status `usage.context`).
type ContextUsage struct {
	Used int64 `json:"used"`
	Size int64 `json:"size"`
}

// StatsSessions counts this sidecar's sessions by state (admitting ones
// are not counted; closed ones until they are retired).
type StatsSessions struct {
	Open    int `json:"open"`
	Turn    int `json:"turn"`
	Closing int `json:"closing"`
	Closed  int `json:"closed"`
	Dead    int `json:"dead"`
	// Retiring, Parked and Reviving count per-turn (and idle-retired warm)
	// sessions by their tree's state (docs/protocol.md §24).
	Retiring int `json:"retiring"`
	Parked   int `json:"parked"`
	Reviving int `json:"reviving"`
}

// StatsTurns: Running and Queued are current; Completed, Failed and
// Cancelled count the turns answered since the sidecar started (queued
// turns cancelled before they started count as cancelled).
type StatsTurns struct {
	Running   int    `json:"running"`
	Queued    int    `json:"queued"`
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
	Cancelled uint64 `json:"cancelled"`
}

// StatsProofs counts the cleanup proofs of this sidecar: Complete and
// Incomplete the first proof of each cleanup (a close's answer, an
// admission's, a provider exit's, shutdown's), Retained the cleanups
// being retried now, Recovered the leftovers of earlier sidecars proven
// gone.
type StatsProofs struct {
	Complete   uint64 `json:"complete"`
	Incomplete uint64 `json:"incomplete"`
	Retained   int    `json:"retained"`
	Recovered  uint64 `json:"recovered"`
}

// Percentiles are p50/p99 in milliseconds (0 without samples).
type Percentiles struct {
	P50 float64 `json:"p50"`
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
	Sessions         StatsSessions `json:"sessions"`
	Turns            StatsTurns    `json:"turns"`
	UpdatesForwarded uint64        `json:"updatesForwarded"`
	UpdatesDropped   uint64        `json:"updatesDropped"`
	Proofs           StatsProofs   `json:"proofs"`
	CloseToProofMs   Percentiles   `json:"closeToProofMs"`
	// LiveTrees: provider trees alive now (live-tree slots held), the
	// launches waiting for one, and --max-live-trees (docs/protocol.md §24).
	LiveTrees StatsLiveTrees `json:"liveTrees"`
	// Network: every session's connections through an allow list since
	// this sidecar started (docs/protocol.md §19.1).
	Network NetworkTotals `json:"network"`
}

// StatsLiveTrees is sidecar/stats `liveTrees`.
type StatsLiveTrees struct {
	Live    int `json:"live"`
	Waiting int `json:"waiting"`
	Max     int `json:"max,omitempty"`
}
