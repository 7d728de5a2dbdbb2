package provstate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
)

// Paths inside restored provider state (docs/protocol.md §24; docs/agents.md,
// Pi): a restore places each provider-state directory byte-exact under
// the new environment's path for its name, so a file that names another
// file by its absolute path still names the old place. pi-acp's session
// map does (sessionId → sessionFile): restored under another HOME, pi-acp
// would load an empty history. A profile's Rewrites name such files; after
// a restore each path there that does not exist is rewritten to the file
// with the longest matching tail of its path inside the new place of its
// directory, when that is a regular file reached through no link (a path
// already inside it is kept).

// maxRewriteBytes bounds a file rewritten after a restore.
const maxRewriteBytes = 16 << 20

// rewriteRestoredPaths applies prof.Rewrites to the restored sources; it
// returns the files it changed. A file that is missing, too large, a link
// or not JSON is left alone.
func rewriteRestoredPaths(prof profiles.Profile, srcs []statestore.Source) ([]string, error) {
	dirs := map[string]string{}
	for _, s := range srcs {
		dirs[s.Name] = s.Path
	}
	var changed []string
	for _, rw := range prof.Rewrites {
		dir, into := dirs[rw.State], dirs[rw.Into]
		if dir == "" || into == "" {
			continue
		}
		file := filepath.Join(dir, filepath.FromSlash(rw.File))
		ok, err := rewriteFile(file, rw.Members, into)
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, file)
		}
	}
	return changed, nil
}

// rewriteFile rewrites the paths at members of the JSON file (see above);
// it reports whether it wrote the file.
func rewriteFile(file string, members []string, into string) (bool, error) {
	fi, err := os.Lstat(file)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRewriteBytes || !reachedWithoutLinks(file) {
		return false, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return false, nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return false, nil
	}
	n := 0
	doc = rewriteAt(doc, members, func(p string) string {
		if np := relocated(p, into); np != "" {
			n++
			return np
		}
		return p
	})
	if n == 0 {
		return false, nil
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, err
	}
	tmp := file + ".acpx-rewrite"
	if err := os.WriteFile(tmp, append(out, '\n'), fi.Mode().Perm()); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// rewriteAt applies fn to the strings at path in v ("*": every member of
// an object).
func rewriteAt(v any, path []string, fn func(string) string) any {
	if len(path) == 0 {
		if s, ok := v.(string); ok {
			return fn(s)
		}
		return v
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if path[0] == "*" {
		for k, c := range obj {
			obj[k] = rewriteAt(c, path[1:], fn)
		}
		return obj
	}
	if c, ok := obj[path[0]]; ok {
		obj[path[0]] = rewriteAt(c, path[1:], fn)
	}
	return obj
}

// relocated returns the new place of the absolute path p inside into: ""
// when p is not absolute, already lies inside into, or no tail of it is
// a regular file under into reached through no link. A path outside into
// is rewritten even when something exists there: on this machine it may
// be another key's HOME, never this session's state.
func relocated(p, into string) string {
	if !filepath.IsAbs(p) {
		return ""
	}
	if c := filepath.Clean(p); strings.HasPrefix(c, filepath.Clean(into)+"/") {
		return ""
	}
	parts := strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")
	for i := 1; i < len(parts); i++ {
		cand := filepath.Join(append([]string{into}, parts[i:]...)...)
		if fi, err := os.Lstat(cand); err == nil && fi.Mode().IsRegular() && reachedWithoutLinks(cand) {
			return cand
		}
	}
	return ""
}

// reachedWithoutLinks reports whether no component of the absolute path
// p is a symbolic link.
func reachedWithoutLinks(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	return err == nil && real == filepath.Clean(p)
}
