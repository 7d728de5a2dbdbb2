package journal

import "encoding/json"

// Journals written before entries had n (and session) start each line
// {"seq":…,"method":…} and hold one session: a reopen started them anew.
// They are read in place, never rewritten: a legacy entry's n is its
// place, counted back from the first entry that has an n (a sidecar of
// this version appending to the old journal numbers on from the legacy
// entries' count), or from 1 when none has. Counting back keeps the
// numbers stable when rotation drops the oldest legacy segments.

// legacyNumbering reports whether the journal with stem in dir holds
// legacy entries (its oldest entry has no n) and, if so, base: the n of
// its i-th legacy entry (from 0, in journal order) is base+i+1.
func legacyNumbering(dir, stem string, maxLine int) (base uint64, legacy bool, err error) {
	for i := Segments - 1; i >= 0; i-- {
		h, ok, err := firstHead(dir, segmentName(stem, i), maxLine)
		if err != nil {
			return 0, false, err
		}
		if ok {
			if h.HasN {
				return 0, false, nil
			}
			break
		}
	}
	var count, first uint64
	found := false
	for i := Segments - 1; i >= 0 && !found; i-- {
		_, err := scan(dir, segmentName(stem, i), maxLine, func(line []byte) bool {
			h, ok := parseHead(line)
			if !ok || !json.Valid(line) {
				return true
			}
			if h.HasN {
				first, found = h.N, true
				return false
			}
			count++
			return true
		})
		if err != nil {
			return 0, false, err
		}
	}
	if found && first > count {
		return first - count - 1, true, nil
	}
	return 0, true, nil
}

// lastEntryOf returns the n, session and seq of the last whole entry of
// the journal with stem in dir (zeros when it has none); a legacy last
// entry's n is the count of the journal's legacy entries.
func lastEntryOf(dir, stem string) (n uint64, session string, seq uint64) {
	for i := 0; i < Segments; i++ {
		h, ok := lastHeadOf(dir, segmentName(stem, i), 0)
		if !ok {
			continue
		}
		if h.HasN {
			return h.N, h.Session, h.Seq
		}
		var count uint64
		for k := Segments - 1; k >= 0; k-- {
			_, _ = scan(dir, segmentName(stem, k), DefaultMaxLineBytes, func(line []byte) bool {
				if hh, ok := parseHead(line); ok && !hh.HasN && json.Valid(line) {
					count++
				}
				return true
			})
		}
		return count, h.Session, h.Seq
	}
	return 0, "", 0
}

// numbered returns a legacy line with its n (and its session, when its
// params begin with one, as every notification's do) put first, as
// entries are written now.
func numbered(line []byte, n uint64) []byte {
	out := make([]byte, 0, len(line)+48)
	out = append(out, `{"n":`...)
	out = appendUint(out, n)
	if s := legacySession(line); s != nil {
		out = append(out, `,"session":"`...)
		out = append(out, s...)
		out = append(out, '"')
	}
	out = append(out, ',')
	return append(out, line[1:]...)
}
