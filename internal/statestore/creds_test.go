package statestore

import (
	"slices"
	"testing"
)

// TestCredentials_NamesAndValuesOfTheStore (docs/protocol.md §24): a
// file:// store has no credentials; an s3:// store names the variables
// its chain reads (the key pair and session token among them, AWS_REGION
// not) and returns the key pair it resolved from this process's
// environment (the test server's, s3test.Server.Env).
func TestCredentials_NamesAndValuesOfTheStore(t *testing.T) {
	kinds(t, func(t *testing.T, mk func(o Options) *Store) {
		s := mk(Options{})
		c, err := s.Credentials(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.b.(*fileBackend); ok {
			if len(c.Env) != 0 || len(c.Values) != 0 {
				t.Fatalf("file:// store credentials %v / %d values, want none", c.Env, len(c.Values))
			}
			return
		}
		for _, n := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"} {
			if !slices.Contains(c.Env, n) {
				t.Errorf("Env %v lacks %s", c.Env, n)
			}
		}
		if slices.Contains(c.Env, "AWS_REGION") {
			t.Errorf("Env %v names AWS_REGION, which is no credential", c.Env)
		}
		if !slices.Contains(c.Values, s3srv.AccessKey) || !slices.Contains(c.Values, s3srv.SecretKey) {
			t.Errorf("Values (%d) lack the server's key pair", len(c.Values))
		}
	})
	if got := CredentialEnv("file:///x"); got != nil {
		t.Errorf("CredentialEnv(file://) = %v", got)
	}
	if got := CredentialEnv("s3://b/p?endpoint=http://127.0.0.1:1"); !slices.Contains(got, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("CredentialEnv(s3://) = %v", got)
	}
}
