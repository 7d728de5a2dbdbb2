package provstate

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// localMarker is the key's note of the archive generation its local
// provider state matches (written after a publication or a restore):
// <stateDir>/sessions/.<stem>.state.
type localMarker struct {
	Generation int64 `json:"generation"`
}

func localMarkerPath(st *store.Store, key string) string {
	return filepath.Join(st.SessionsDir(), "."+store.EncodeKey(key)+".state")
}

// localGeneration is the generation the local copy matches, 0 if unknown.
func localGeneration(st *store.Store, key string) int64 {
	b, err := os.ReadFile(localMarkerPath(st, key))
	if err != nil {
		return 0
	}
	var m localMarker
	if json.Unmarshal(b, &m) != nil {
		return 0
	}
	return m.Generation
}

// markLocal notes that the local copy matches generation (best effort: a
// lost marker costs one restore that keeps every existing file).
func markLocal(st *store.Store, key string, generation int64, log *zap.Logger) {
	b, _ := json.Marshal(localMarker{Generation: generation})
	p := localMarkerPath(st, key)
	tmp := p + ".tmp-" + randomHex()
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		if err = os.Rename(tmp, p); err != nil {
			_ = os.Remove(tmp)
			log.Warn("state marker not written", zap.Error(err))
		}
	}
}

// randomHex is 16 random hex digits (a temporary file's unique part).
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownSources are the key's record and its journal's existing segments.
func ownSources(st *store.Store, key string) []statestore.Source {
	out := []statestore.Source{{Name: recordSource, Path: st.RecordPath(key)}}
	stem := journal.Stem(key)
	for i := 0; i < journal.Segments; i++ {
		p := journal.SegmentPath(st.SessionsDir(), stem, i)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, statestore.Source{Name: journalSource + "." + strconv.Itoa(i), Path: p})
		}
	}
	return out
}

// restoreTargets maps every archive name the key's session can place to
// its path here: the provider-state dirs srcs, the record and journal
// segments.
func restoreTargets(st *store.Store, key string, srcs []statestore.Source) map[string]string {
	t := map[string]string{recordSource: st.RecordPath(key)}
	stem := journal.Stem(key)
	for i := 0; i < journal.Segments; i++ {
		t[journalSource+"."+strconv.Itoa(i)] = journal.SegmentPath(st.SessionsDir(), stem, i)
	}
	for _, src := range srcs {
		t[src.Name] = src.Path
	}
	return t
}

// movedJournalGap is how many entry numbers a restored journal skips.
const movedJournalGap = 1 << 20

// reserveMovedJournal makes the key's journal, just restored from another
// sidecar's publication, skip movedJournalGap entry numbers with a
// journal/gap entry ("moved"): what the previous owner wrote after its
// last publication (its retire's proof, a fenced ending) is not here, and
// its numbers are never reused for this sidecar's entries, so a host
// paging session/events by afterN across the move sees the gap instead of
// two entries under one n (issue 29's trial).
func (k Session) reserveMovedJournal(st *store.Store) {
	j, err := journal.Open(st.SessionsDir(), k.Key, k.JournalMaxBytes)
	if err != nil {
		k.Log.Warn("restored journal not opened to mark the move", zap.Error(err))
		return
	}
	if err := j.Reserve(movedJournalGap, "moved: entries the previous owner wrote after its last publication are not here"); err != nil {
		k.Log.Warn("restored journal: the move's gap entry not written", zap.Error(err))
	}
	_ = j.Close()
}
