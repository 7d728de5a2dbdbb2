package controls

import "encoding/json"

// Pins are the model and mode the host asked for (open, setModel,
// setMode, or pinned in the record by an earlier sidecar): the only ones
// re-applied on resume; and the config options the host set since the
// open (setConfigOption of any other option), in order, which a revive
// re-applies too (docs/protocol.md §24).
type Pins struct {
	// Model and Mode are the model id and mode id the host pinned; ""
	// when it pinned none.
	Model, Mode string
	// Options are the other config options the host set, in the order
	// it set them (one entry per id); nil when none.
	Options []pinnedOption
}

// pinnedOption is one config option value the host set: the option's id
// and its JSON value (a string or a boolean).
type pinnedOption struct {
	// ID is the config option's ACP id.
	ID string
	// Value is the value set, as JSON (a string or a boolean).
	Value json.RawMessage
}

// WithOption returns p with option id set to value (replacing an earlier
// value of id, which moves to the end: the order the host set them).
// value is copied; p's own Options are not changed.
func (p Pins) WithOption(id string, value json.RawMessage) Pins {
	out := make([]pinnedOption, 0, len(p.Options)+1)
	for _, o := range p.Options {
		if o.ID != id {
			out = append(out, o)
		}
	}
	p.Options = append(out, pinnedOption{ID: id, Value: append(json.RawMessage(nil), value...)})
	return p
}
