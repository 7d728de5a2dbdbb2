package adapter

import "encoding/json"

// pins are the model and mode the host asked for (open, setModel,
// setMode, or pinned in the record by an earlier sidecar): the only ones
// re-applied on resume; and the config options the host set since the
// open (setConfigOption of any other option), in order, which a revive
// re-applies too (docs/protocol.md §24).
type pins struct {
	model, mode string
	options     []pinnedOption
}

// pinnedOption is one config option value the host set.
type pinnedOption struct {
	id    string
	value json.RawMessage
}

// withOption returns p with option id set to value (replacing an earlier
// value of id, which moves to the end: the order the host set them).
func (p pins) withOption(id string, value json.RawMessage) pins {
	out := make([]pinnedOption, 0, len(p.options)+1)
	for _, o := range p.options {
		if o.id != id {
			out = append(out, o)
		}
	}
	p.options = append(out, pinnedOption{id: id, value: append(json.RawMessage(nil), value...)})
	return p
}
