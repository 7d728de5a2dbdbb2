//go:build !linux

package sandbox

// Probe reports no sandbox outside Linux.
func Probe() Caps { return Caps{Reason: "Landlock is Linux only"} }

// Apply refuses outside Linux.
func Apply(p *Plan) error {
	if p.Empty() {
		return nil
	}
	return &UnsupportedError{Missing: []string{"Landlock is Linux only"}}
}
