package modelstub

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// WriteCodexHome writes dir/config.toml so that codex uses the loopback
// model at baseURL over the Responses wire API, keyed by the
// OPENAI_API_KEY env variable (docs/agents.md, Codex legacy;
// OPENAI_BASE_URL alone is ignored by codex).
//
// baseURL is the stub's root such as "http://127.0.0.1:PORT"; "/v1" is
// appended unless the path already ends in "/v1". dir is created (0700) if
// missing; the file is written 0600 and replaced if present. Errors: a
// baseURL that is not an absolute http(s) URL or holds characters that
// would need TOML escaping, or any filesystem error.
func WriteCodexHome(dir, baseURL string) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("modelstub: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("modelstub: base URL must be absolute http(s)")
	}
	if strings.ContainsAny(baseURL, "\"\\\n\r\t") {
		return errors.New("modelstub: base URL holds a quote, backslash or control character")
	}
	base := strings.TrimRight(baseURL, "/")
	if !strings.HasSuffix(u.Path, "/v1") && !strings.HasSuffix(u.Path, "/v1/") {
		base += "/v1"
	}
	cfg := fmt.Sprintf(`# Written by modelstub.WriteCodexHome (docs/agents.md).
model_provider = "local"

[model_providers.local]
name = "local"
base_url = "%s"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, base)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("modelstub: codex home: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("modelstub: codex home: %w", err)
	}
	return nil
}
