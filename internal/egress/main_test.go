package egress

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the package's tests under goleak; a re-execution of this
// binary as the namespace tests' tree (childEnv) runs that instead.
func TestMain(m *testing.M) {
	if stage := os.Getenv(childEnv); stage != "" {
		childMain(stage)
	}
	goleak.VerifyTestMain(m)
}
