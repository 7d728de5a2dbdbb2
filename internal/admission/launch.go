package admission

import (
	"os"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// checkAdditionalDirs: each of the open's additionalDirectories must be an
// existing directory (-32602 naming it), before anything is launched.
func checkAdditionalDirs(p protocol.OpenParams) *protocol.Error {
	for i, d := range p.AdditionalDirectories {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return protocol.InvalidParams("additionalDirectories."+strconv.Itoa(i), "additionalDirectories entries must be existing directories")
		}
	}
	return nil
}
