package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Owned is one entry of the ownership ledger, <stateDir>/owned/<ID>.json:
// a live provider this sidecar launched, written before the provider is
// admitted so that a later sidecar on the same stateDir can recognise and
// kill it if this one dies (docs/operations.md, "The ownership ledger").
// Pid and StartTime (clock ticks since boot, /proc/<pid>/stat field 22)
// together pin the process identity; Pgid is its process group (reported,
// never used to kill); Cgroup the cgroup v2 path when contained there;
// Containment the protocol's containment name (docs/protocol.md §12
// `containment`); CreatedAt a TimeLayout timestamp. An entry is a claim:
// recovery kills only what it can prove (internal/reaper Recover), since
// anyone who can write the state dir can write an entry.
type Owned struct {
	// ID names the entry's file, <ID>.json (ValidateOwnedID); the
	// sidecar uses the session id.
	ID string `json:"id"`
	// SidecarPid is the pid of the sidecar that wrote the entry, its
	// owner.
	SidecarPid int `json:"sidecarPid"`
	// SidecarStartTime is the owning sidecar's start time (field 22 of
	// /proc/<pid>/stat), so a recycled sidecar pid is not mistaken for it.
	SidecarStartTime uint64 `json:"sidecarStartTime,omitempty"`
	// Session is the sidecar session id the provider serves.
	Session string `json:"session"`
	// SessionKey is that session's key.
	SessionKey string `json:"sessionKey"`
	// Pid is the provider leader's pid (0 in the entry written before
	// the launch).
	Pid int `json:"pid"`
	// StartTime is the leader's start time as the process table gives it:
	// on Linux clock ticks since boot, on macOS microseconds since the
	// epoch (0 before the launch).
	StartTime uint64 `json:"startTime"`
	// Pgid is the leader's process group (0 before the launch).
	Pgid int `json:"pgid"`
	// Cgroup is the absolute path of the tree's cgroup directory ("":
	// none, outside cgroup containment or before the launch).
	Cgroup string `json:"cgroup,omitempty"`
	// CgroupParent is the directory the provider's cgroup is (or would be)
	// made in, for entries written before the launch.
	CgroupParent string `json:"cgroupParent,omitempty"`
	// MarkerSHA256 is the hex SHA-256 of the environment entry every
	// process of the tree inherits (ACPX_SIDECAR_SESSION=<session
	// id>.<unguessable token>; reaper.MarkerDigest): a process whose
	// environment has the entry this digests is the tree's. The token
	// itself is never written.
	MarkerSHA256 string `json:"markerSha256,omitempty"`
	// Containment is the mode the tree is launched under: "cgroup",
	// "subreaper", "process-group" or "process-table".
	Containment string `json:"containment"`
	// CreatedAt is when the entry was last written (TimeLayout).
	CreatedAt string `json:"createdAt"`
}

// ValidateOwnedID reports whether id can name a ledger file: 1–128 bytes of
// [A-Za-z0-9._-], not starting with '.'.
func ValidateOwnedID(id string) error {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return fmt.Errorf("store: invalid owned id %q", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("store: invalid owned id %q", id)
		}
	}
	return nil
}

// WriteOwned writes o to <stateDir>/owned/<o.ID>.json atomically (0600,
// fsync'd file and directory), replacing an entry with the same ID. Errors:
// an invalid ID (ValidateOwnedID), Pid < 0, or the I/O error. Pid 0 is an
// entry written before the launch (the provider's pid is not known yet).
func (s *Store) WriteOwned(o Owned) error {
	_, err := s.writeOwned(o, true)
	return err
}

// WriteOwnedDeferred is WriteOwned without its fsyncs: the entry is in
// place when it returns (a sidecar killed after it leaves the entry for
// the next one on this machine) and durable once the returned Pending's
// Sync returns. Admission writes the entry before the launch this way and
// its durable successor, with the provider's identity, while the agent
// starts (docs/protocol.md §18.5). Errors: as WriteOwned.
func (s *Store) WriteOwnedDeferred(o Owned) (*Pending, error) {
	return s.writeOwned(o, false)
}

func (s *Store) writeOwned(o Owned, durable bool) (*Pending, error) {
	if err := ValidateOwnedID(o.ID); err != nil {
		return nil, err
	}
	if o.Pid < 0 {
		return nil, fmt.Errorf("store: owned %s: pid %d < 0", o.ID, o.Pid)
	}
	b, err := marshalNoHTML(o)
	if err != nil {
		return nil, fmt.Errorf("store: owned: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, fmt.Errorf("store: owned: %w", err)
	}
	out.WriteByte('\n')
	return s.writeFile(s.owned, o.ID+".json", out.Bytes(), durable)
}

// RemoveOwned deletes the ledger entry id and fsyncs the directory. A
// missing entry is not an error.
func (s *Store) RemoveOwned(id string) error {
	if err := ValidateOwnedID(id); err != nil {
		return err
	}
	return withDir(s.owned, func(d *SafeDir) error {
		if err := d.Remove(id + ".json"); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("store: remove owned: %w", err)
		}
		return d.Sync()
	})
}

// MaxOwnedBytes bounds a ledger entry ListOwned reads (64 KiB); a larger
// one is reported and skipped, never read.
const MaxOwnedBytes = 64 << 10

// ListOwned returns every readable ledger entry, sorted by ID. Entries that
// cannot be read or parsed, whose "id" differs from the file name, that are
// links, not the sidecar's uid's, writable by others or larger than
// MaxOwnedBytes (SafeDir) are skipped and reported in the returned error
// (errors.Join, one per entry), so a non-nil error can come with a usable
// list. Temp files are ignored.
func (s *Store) ListOwned() ([]Owned, error) {
	d, err := OpenSafeDir(s.owned)
	if err != nil {
		return nil, fmt.Errorf("store: list owned: %w", err)
	}
	defer d.Close()
	ents, err := os.ReadDir(s.owned)
	if err != nil {
		return nil, fmt.Errorf("store: list owned: %w", err)
	}
	var out []Owned
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := d.ReadFile(name, MaxOwnedBytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("store: owned %s: %w", name, err))
			continue
		}
		var o Owned
		if err := json.Unmarshal(b, &o); err != nil {
			errs = append(errs, fmt.Errorf("%w: owned %s: %v", ErrCorrupt, name, err))
			continue
		}
		if o.ID+".json" != name {
			errs = append(errs, fmt.Errorf("%w: owned %s: id %q does not match the file name", ErrCorrupt, name, o.ID))
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}

// ProcStat is the part of /proc/<pid>/stat the ledger needs.
type ProcStat struct {
	// Pid is field 1, the process's pid.
	Pid       int
	Comm      string // without the parentheses; may contain spaces and ')'
	State     byte   // field 3: R, S, D, Z, T, …
	Ppid      int    // field 4
	Pgrp      int    // field 5
	StartTime uint64 // field 22, clock ticks since boot
}

// ReadProcStat reads and parses /proc/<pid>/stat. A process that does not
// exist yields an error wrapping fs.ErrNotExist (a zombie still exists, with
// State 'Z').
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("store: proc stat: %w", err)
	}
	return parseProcStat(b)
}

// ProcStartTime returns field 22 of /proc/<pid>/stat (start time in clock
// ticks since boot). The comm field is located by its last ')', so a name
// containing spaces or parentheses cannot shift the fields. Errors wrap
// fs.ErrNotExist for a pid that does not exist.
func ProcStartTime(pid int) (uint64, error) {
	st, err := ReadProcStat(pid)
	if err != nil {
		return 0, err
	}
	return st.StartTime, nil
}

// IdentityMatches reports whether pid still names the process that had
// startTime (zombies included): false with nil error when the pid is gone or
// has been recycled (docs/rules.md#r22).
func IdentityMatches(pid int, startTime uint64) (bool, error) {
	st, err := ReadProcStat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.StartTime == startTime, nil
}

func parseProcStat(b []byte) (ProcStat, error) {
	s := strings.TrimRight(string(b), "\n")
	open := strings.IndexByte(s, '(')
	end := strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return ProcStat{}, errors.New("store: proc stat: malformed")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return ProcStat{}, fmt.Errorf("store: proc stat: pid: %w", err)
	}
	rest := strings.Fields(s[end+1:]) // rest[0] is field 3
	const startIdx = 22 - 3
	if len(rest) <= startIdx || len(rest[0]) != 1 {
		return ProcStat{}, errors.New("store: proc stat: too few fields")
	}
	st := ProcStat{Pid: pid, Comm: s[open+1 : end], State: rest[0][0]}
	if st.Ppid, err = strconv.Atoi(rest[1]); err != nil {
		return ProcStat{}, fmt.Errorf("store: proc stat: ppid: %w", err)
	}
	if st.Pgrp, err = strconv.Atoi(rest[2]); err != nil {
		return ProcStat{}, fmt.Errorf("store: proc stat: pgrp: %w", err)
	}
	if st.StartTime, err = strconv.ParseUint(rest[startIdx], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("store: proc stat: starttime: %w", err)
	}
	return st, nil
}

// RemoveStaleTemps removes temp files (isTempName) older than age from the
// ledger and sessions directories: what a writer killed between its write
// and its rename left behind. A live writer's temp file lives for
// milliseconds. It returns how many were removed.
func (s *Store) RemoveStaleTemps(age time.Duration) int {
	n := s.removeDeadRestores(age)
	for _, dir := range []string{s.owned, s.SessionsDir()} {
		_ = withDir(dir, func(d *SafeDir) error {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if !isTempName(e.Name()) {
					continue
				}
				if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
					if d.Remove(e.Name()) == nil {
						n++
					}
				}
			}
			return nil
		})
	}
	return n
}

// isTempName reports whether name is one SafeDir.CreateTemp makes:
// ".tmp-" and 16 lowercase hex digits. A session key's files may start
// with ".tmp-" too (EncodeKey keeps a leading "."), so the prefix alone
// would sweep a key's record, journal and hold file (found by a
// fresh-user trial).
func isTempName(name string) bool {
	hexPart, ok := strings.CutPrefix(name, ".tmp-")
	if !ok || len(hexPart) != 16 {
		return false
	}
	for _, c := range hexPart {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// restorePrefix is statestore.RestoreScratchPrefix (not imported: the
// state store sits above this package).
const restorePrefix = ".acpx-restore-"

// removeDeadRestores removes, from the state dir's root, the scratch
// directories of restores whose process is gone (".acpx-restore-<pid>-…",
// older than age): decrypted provider state a killed sidecar left
// (adversarial trial: 1.4 GB survived later sidecars). Removal goes
// beneath the state dir's handle, never through a link.
func (s *Store) removeDeadRestores(age time.Duration) int {
	n := 0
	root, err := OpenSafeDir(s.dir)
	if err != nil {
		return 0
	}
	defer root.Close()
	{
		ents, _ := os.ReadDir(s.dir)
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), restorePrefix)
			if !ok || !e.IsDir() {
				continue
			}
			pidText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
				continue // not ours to judge, or its sidecar may still run
			}
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
				if removeAllAt(root.fd, e.Name(), filepath.Join(s.dir, e.Name()), 0) == nil {
					n++
				}
			}
		}
	}
	return n
}
