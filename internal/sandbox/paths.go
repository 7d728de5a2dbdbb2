package sandbox

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Installation is the command's own installation (docs/protocol.md §19:
// never writable; readable in strict mode): the executable exe itself
// and, for exe and every absolute file among args (an interpreter's
// script), the outermost node_modules directory that holds it (an npm
// package and its dependencies, the agents' native binaries included);
// and, when exe is a script, its "#!" interpreter — a path, or a NAME
// after /usr/bin/env looked up in pathEnv (the launch PATH) — with that
// interpreter's own installation (interpreterRoot: a node under ~/.nvm,
// a python under ~/.pyenv), followed through interpreters that are
// scripts themselves (a pyenv shim), at most four deep. Symlinks are
// resolved; paths that do not exist are left out.
func Installation(exe string, args []string, pathEnv string) []string {
	var out []string
	add := func(p string, self bool) string {
		if !filepath.IsAbs(p) {
			return ""
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return ""
		}
		if fi, err := os.Stat(real); err != nil || fi.IsDir() {
			return ""
		}
		if self {
			out = append(out, real)
		}
		if nm := outermostNodeModules(real); nm != "" {
			out = append(out, nm)
		}
		return real
	}
	cur := add(exe, true)
	for _, a := range args {
		add(a, false)
	}
	for depth := 0; depth < 4 && cur != ""; depth++ {
		interp := shebang(cur, pathEnv)
		if interp == "" {
			break
		}
		if cur = add(interp, true); cur != "" {
			if root := interpreterRoot(cur); root != "" {
				out = append(out, root)
			}
		}
	}
	return uniqueSorted(out)
}

// shebang is the interpreter of script file p: the path of its "#!"
// line, or, for "#!/usr/bin/env [-S] NAME ...", NAME found in pathEnv
// ("" when p is no script or NAME is not found).
func shebang(p, pathEnv string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, name := range fields[1:] {
		if strings.HasPrefix(name, "-") || strings.Contains(name, "=") {
			continue // env's options (-S) and assignments
		}
		if filepath.IsAbs(name) {
			return name
		}
		for _, dir := range filepath.SplitList(pathEnv) {
			if !filepath.IsAbs(dir) {
				continue
			}
			c := filepath.Join(dir, name)
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return c
			}
		}
		return ""
	}
	return ""
}

// VersionManagers are the directory names whose tree an interpreter
// inside it needs whole (its shims, versions and own scripts): pyenv,
// nvm, rbenv, nodenv, goenv, asdf, volta, fnm, mise, bun, deno, conda.
var VersionManagers = []string{".pyenv", ".nvm", ".rbenv", ".nodenv", ".goenv", ".asdf", ".volta", ".fnm", "mise", ".bun", ".deno",
	"miniconda3", "anaconda3", "miniforge3"}

// interpreterRoot is the installation of an interpreter at p (resolved):
// the version manager's directory it lies in (~/.pyenv, ~/.nvm, …), else
// the prefix of an interpreter in <prefix>/bin under /opt ("/opt/node"),
// else "" (a system interpreter: the system paths are read already).
func interpreterRoot(p string) string {
	parts := strings.Split(p, "/")
	for i := len(parts) - 2; i > 0; i-- {
		if slices.Contains(VersionManagers, parts[i]) {
			return strings.Join(parts[:i+1], "/")
		}
	}
	dir := filepath.Dir(p)
	if filepath.Base(dir) == "bin" && Within(dir, "/opt") {
		if prefix := filepath.Dir(dir); prefix != "/opt" {
			return prefix
		}
	}
	return ""
}

// outermostNodeModules is the shortest ancestor of p named node_modules
// ("" if none).
func outermostNodeModules(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part == "node_modules" && i > 0 {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return ""
}

// CgroupMounts are the cgroup filesystem's mount points (every cgroup
// and cgroup2 mount of /proc/self/mountinfo) and /sys/fs/cgroup: never
// writable from inside, since a root agent could move a descendant out of
// its cgroup (docs/protocol.md §19).
func CgroupMounts() []string {
	out := []string{}
	if fi, err := os.Stat("/sys/fs/cgroup"); err == nil && fi.IsDir() {
		out = append(out, "/sys/fs/cgroup")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mp, fstype, ok := parseMountinfo(sc.Text())
		if ok && (fstype == "cgroup" || fstype == "cgroup2") {
			out = append(out, mp)
		}
	}
	return uniqueSorted(out)
}

// parseMountinfo returns the mount point (field 5, octal escapes
// decoded) and the filesystem type (the first field after " - ").
func parseMountinfo(line string) (mountPoint, fstype string, ok bool) {
	pre, post, found := strings.Cut(line, " - ")
	if !found {
		return "", "", false
	}
	f := strings.Fields(pre)
	g := strings.Fields(post)
	if len(f) < 5 || len(g) < 1 {
		return "", "", false
	}
	return unescapeOctal(f[4]), g[0], true
}

// unescapeOctal decodes mountinfo's \NNN escapes (space, tab, newline,
// backslash).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal3(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal3(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}
