package statestore

import (
	"context"
	"fmt"
	"os"
)

// s3CredentialEnv are the variables through which the AWS SDK's default
// chain (config.LoadDefaultConfig, what an s3:// store is opened with)
// finds its credentials: the static keys and their old aliases, the
// session token, the profile and the files it is read from, web identity
// and role assumption, and the container endpoint with its token. An agent
// given any of them could sign requests as the store, or find out how.
var s3CredentialEnv = []string{
	"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
}

// s3SecretEnv are those of s3CredentialEnv whose value is itself a
// credential (the others name a file, a profile, a role or an endpoint).
var s3SecretEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY",
	"AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN"}

// CredentialEnv returns the names of the environment variables an
// s3:// store with URL url takes its credentials from (a fresh slice);
// nil for any other URL (a file:// store needs none). docs/protocol.md §24:
// the sidecar never passes them from its own environment to an agent.
func CredentialEnv(url string) []string {
	if len(url) < 5 || url[:5] != "s3://" {
		return nil
	}
	return append([]string(nil), s3CredentialEnv...)
}

// Credentials is what an agent must never get of the store's access
// (docs/protocol.md §24): Env, the variables the store's credential chain
// reads (CredentialEnv), and Values, the credential values the store signs
// with — the access key id, the secret key and the session token the
// chain resolved, wherever it found them, and the values of the secret
// ones among Env in this process's environment. Values are secrets: never
// log them.
type Credentials struct {
	// Env are the names of the variables the store's credential chain
	// reads; nil for a file:// store.
	Env []string
	// Values are the credential values the store signs with and the
	// values of the secret variables among Env (secrets: never log
	// them); nil for a file:// store.
	Values []string
}

// Credentials returns the store's Credentials: for file://, none (the zero
// Credentials); for s3://, Env and the Values resolved now (the chain is
// asked once, bounded by the request timeout; credentials it refreshes
// later, such as a role's next session token, are not in Values). Errors:
// ErrInvalid when the chain finds no credentials (as CheckCredentials),
// never naming a value.
func (s *Store) Credentials(ctx context.Context) (Credentials, error) {
	b, ok := s.b.(*s3Backend)
	if !ok {
		return Credentials{}, nil
	}
	out := Credentials{Env: append([]string(nil), s3CredentialEnv...)}
	p := b.c.Options().Credentials
	if p == nil {
		return Credentials{}, fmt.Errorf("%w: no S3 credential provider", ErrInvalid)
	}
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	c, err := p.Retrieve(ctx)
	if err != nil {
		return Credentials{}, fmt.Errorf("%w: no S3 credentials: %v", ErrInvalid, err)
	}
	seen := map[string]bool{}
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			out.Values = append(out.Values, v)
		}
	}
	add(c.AccessKeyID)
	add(c.SecretAccessKey)
	add(c.SessionToken)
	for _, n := range s3SecretEnv {
		add(os.Getenv(n))
	}
	return out, nil
}
