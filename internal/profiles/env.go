package profiles

import "strings"

// EnvValue is the last value of name in env ("K=V" entries, as a launch
// environment holds them; "" when absent): the lookup StateDir.Resolve
// takes.
func EnvValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
