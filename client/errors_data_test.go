package client_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

// TestError_DataAccessors: an error's data members are read out —
// SANDBOX_CONFLICT's paths (a Go host had to decode Data for them; from a
// user trial), field, retryable — and absent members read as zero.
func TestError_DataAccessors(t *testing.T) {
	e := &client.Error{Code: -32000, DataCode: "SANDBOX_CONFLICT",
		Data: json.RawMessage(`{"code":"SANDBOX_CONFLICT","retryable":false,"paths":["/srv/store","/srv/state"]}`)}
	if got := e.Paths(); !slices.Equal(got, []string{"/srv/store", "/srv/state"}) {
		t.Errorf("Paths %v", got)
	}
	if e.Retryable() || e.Field() != "" || e.Proof() != nil {
		t.Errorf("retryable %v field %q proof %v, want none", e.Retryable(), e.Field(), e.Proof())
	}
	if got := (&client.Error{Code: -32602, Data: json.RawMessage(`{"field":"cwd"}`)}).Paths(); got != nil {
		t.Errorf("Paths of an error without paths: %v", got)
	}
}
