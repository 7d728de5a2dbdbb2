package adapter

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
)

// TestManager_OneStorePerDirectory: a stateDir is keyed by its cleaned
// path, so "/d", "/d/" and "/d/." share one store (and so one ledger
// sweep); another directory gets its own.
func TestManager_OneStorePerDirectory(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := NewManager(config.DefaultConfig(), &fakeHost{})
	dir, other := t.TempDir(), t.TempDir()
	a, err := m.StoreFor(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{dir + "/", dir + "/.", dir + "//"} {
		b, err := m.StoreFor(spelling)
		if err != nil || b != a {
			t.Errorf("storeFor(%q) = %p, %v; want the store of %q (%p)", spelling, b, err, dir, a)
		}
	}
	if c, err := m.StoreFor(other); err != nil || c == a {
		t.Errorf("storeFor(%q) = %p, %v; want a store of its own", other, c, err)
	}
	n := len(m.sh.Stores.Dirs())
	if n != 2 {
		t.Errorf("%d stores, want 2", n)
	}
	m.Shutdown()
	m.Wait()
}
