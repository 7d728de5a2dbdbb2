package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Installation is the command's own installation (docs/protocol.md §19:
// never writable; readable in strict mode): the executable exe itself
// and, for exe and every absolute file among args (an interpreter's
// script), the outermost node_modules directory that holds it (an npm
// package and its dependencies, the agents' native binaries included).
// Symlinks are resolved; paths that do not exist are left out.
func Installation(exe string, args []string) []string {
	var out []string
	add := func(p string, self bool) {
		if !filepath.IsAbs(p) {
			return
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		if fi, err := os.Stat(real); err != nil || fi.IsDir() {
			return
		}
		if self {
			out = append(out, real)
		}
		if nm := outermostNodeModules(real); nm != "" {
			out = append(out, nm)
		}
	}
	add(exe, true)
	for _, a := range args {
		add(a, false)
	}
	return uniqueSorted(out)
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
