package proctable

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// parseProcArgs2 decodes a Darwin KERN_PROCARGS2 buffer (built and tested
// on every system; only the Darwin reader calls it): a 32-bit argc (little
// endian on both Darwin architectures), the NUL-terminated executable
// path, NUL padding, argc NUL-terminated arguments, then the environment
// entries, followed by the kernel's "apple" strings. It returns every
// non-empty string after the arguments. Errors: a buffer too short for
// argc, or one that ends inside the arguments.
func parseProcArgs2(b []byte) ([]string, error) {
	if len(b) < 4 {
		return nil, errors.New("proctable: short KERN_PROCARGS2 buffer")
	}
	argc := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, errors.New("proctable: KERN_PROCARGS2 without an executable path")
	}
	b = bytes.TrimLeft(b[i:], "\x00")
	for n := 0; n < argc; n++ {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, errors.New("proctable: KERN_PROCARGS2 ends inside argv")
		}
		b = b[i+1:]
	}
	return splitNUL(b), nil
}

// splitNUL splits NUL-terminated strings, dropping empty ones.
func splitNUL(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
