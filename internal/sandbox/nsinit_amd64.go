//go:build linux

package sandbox

import (
	"bytes"
	"unsafe"
)

// nsinitText is the init program (nsinit_amd64.s); never called from Go.
func nsinitText()

// nsinitStart is the address of nsinitText's first instruction.
func nsinitStart() *byte

// elfMachine is EM_X86_64.
const elfMachine = 62

// nsinitMarker ends the init's code (ud2, then "ACPXINIT").
var nsinitMarker = []byte{0x0f, 0x0b, 'A', 'C', 'P', 'X', 'I', 'N', 'I', 'T'}

// nsinitCode is a copy of the init's machine code, through its ud2 (it
// is position independent and uses only its own stack), nil if the
// marker is not within 4 KiB (it always is: a test checks).
func nsinitCode() []byte {
	text := unsafe.Slice(nsinitStart(), 4096)
	i := bytes.Index(text, nsinitMarker)
	if i < 0 {
		return nil
	}
	return bytes.Clone(text[:i+2])
}
