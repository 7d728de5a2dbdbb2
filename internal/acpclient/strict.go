package acpclient

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
)

// decodeUpdateParams decodes ACP session/update params strictly — an
// object with an optional string sessionId and an update that is an ACP
// SessionUpdate: an object whose sessionUpdate is a non-empty string —
// and cleans the update for the host (jsonl.CleanRaw). why says what is
// wrong, "" when nothing is.
func decodeUpdateParams(params json.RawMessage) (u Update, why string) {
	p, why := strictjson.DecodeObject(params)
	if why != "" {
		return u, "params: " + why
	}
	sid, present, ok := p.Str("sessionId")
	if !ok {
		return u, "sessionId is not a string"
	}
	if present {
		u.BackendSessionID = []byte(sid)
	}
	raw, has := p["update"]
	if !has {
		return u, "no update"
	}
	up, why := strictjson.DecodeObject(raw)
	if why != "" {
		return u, "update: " + why
	}
	kind, _, ok := up.Str("sessionUpdate")
	if !ok || kind == "" {
		return u, "update has no non-empty string sessionUpdate"
	}
	u.Kind, u.Update = KindOf([]byte(kind)), jsonl.CleanRaw(raw)
	return u, ""
}
