package jsonl

import "encoding/json"

// MemberName is a key as Members reports it, decoded: escape sequences
// resolved when escaped is set (the name every JSON reader compares).
func MemberName(key []byte, escaped bool) string {
	k := string(key)
	if escaped {
		_ = json.Unmarshal([]byte(`"`+k+`"`), &k)
	}
	return k
}

// Members calls fn with each member of obj, which must be one JSON object
// (surrounding white space allowed), in order: key is the raw key without
// its quotes (escaped reports an escape sequence in it: MemberName decodes it
// before comparing), val the raw value, both subslices of obj. It validates obj
// in the same pass and returns false, having called fn for the members
// before the fault, if obj is not one valid JSON object. It allocates
// nothing; a strict decoder (duplicate and case-variant keys) is built on
// it.
func Members(obj []byte, fn func(key []byte, escaped bool, val []byte)) bool {
	s := scanner{b: obj}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	if s.open('}') {
		s.ws()
		return s.i == len(s.b)
	}
	for {
		key, escaped, ok := s.memberKey()
		if !ok {
			return false
		}
		vstart := s.i
		if !s.value(1) {
			return false
		}
		fn(key, escaped, s.b[vstart:s.i])
		if more, ok := s.next('}'); !more {
			s.ws()
			return ok && s.i == len(s.b)
		}
	}
}

// TopString returns the contents of the string member key of obj (a valid
// JSON object, e.g. an Envelope value), scanning only until that member;
// false if it is absent, not a string, or has escape sequences.
func TopString(obj []byte, key string) ([]byte, bool) {
	s := scanner{b: obj}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, false
	}
	s.i++
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil, false
		}
		kstart := s.i
		escaped, ok := s.str()
		if !ok {
			return nil, false
		}
		k := s.b[kstart+1 : s.i-1]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return nil, false
		}
		s.i++
		s.ws()
		vstart := s.i
		if !s.value(1) {
			return nil, false
		}
		if !escaped && string(k) == key {
			return StringValue(s.b[vstart:s.i])
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ',' {
			return nil, false
		}
		s.i++
	}
}
