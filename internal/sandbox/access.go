package sandbox

import (
	"os"
	"path/filepath"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Access rights of the rules (the landlock/syscall bits, re-exported so a
// Plan can be read without that package).
const (
	AccessFSExecute    = ll.AccessFSExecute
	AccessFSWriteFile  = ll.AccessFSWriteFile
	AccessFSReadFile   = ll.AccessFSReadFile
	AccessFSReadDir    = ll.AccessFSReadDir
	AccessFSRemoveDir  = ll.AccessFSRemoveDir
	AccessFSRemoveFile = ll.AccessFSRemoveFile
	AccessFSMakeChar   = ll.AccessFSMakeChar
	AccessFSMakeDir    = ll.AccessFSMakeDir
	AccessFSMakeReg    = ll.AccessFSMakeReg
	AccessFSMakeSock   = ll.AccessFSMakeSock
	AccessFSMakeFifo   = ll.AccessFSMakeFifo
	AccessFSMakeBlock  = ll.AccessFSMakeBlock
	AccessFSMakeSym    = ll.AccessFSMakeSym
	AccessFSRefer      = ll.AccessFSRefer
	AccessFSTruncate   = ll.AccessFSTruncate
	AccessFSIoctlDev   = ll.AccessFSIoctlDev

	AccessNetBindTCP    = ll.AccessNetBindTCP
	AccessNetConnectTCP = ll.AccessNetConnectTCP

	ScopeAbstractUnixSocket = ll.ScopeAbstractUnixSocket
	ScopeSignal             = ll.ScopeSignal
)

// HandledFS is every filesystem right of Landlock ABI 5 (execute through
// ioctl on devices): the set a filesystem sandbox restricts, the same on
// every kernel that can enforce it (FSMinABI), never downgraded.
const HandledFS uint64 = AccessFSExecute | AccessFSWriteFile | AccessFSReadFile | AccessFSReadDir |
	AccessFSRemoveDir | AccessFSRemoveFile | AccessFSMakeChar | AccessFSMakeDir | AccessFSMakeReg |
	AccessFSMakeSock | AccessFSMakeFifo | AccessFSMakeBlock | AccessFSMakeSym | AccessFSRefer |
	AccessFSTruncate | AccessFSIoctlDev

// ReadAccess is what a readable path grants: read files, list
// directories, execute.
const ReadAccess uint64 = AccessFSExecute | AccessFSReadFile | AccessFSReadDir

// WriteAccess is what a writable directory adds: write, truncate, create
// and remove files, directories, symlinks, sockets and FIFOs, and move
// them within writable places (refer). Never device nodes (make_char,
// make_block) nor ioctl on devices: a root agent could otherwise make a
// block device of the disk in its cwd and write it raw.
const WriteAccess uint64 = AccessFSWriteFile | AccessFSRemoveDir | AccessFSRemoveFile | AccessFSMakeDir |
	AccessFSMakeReg | AccessFSMakeSock | AccessFSMakeFifo | AccessFSMakeSym | AccessFSRefer | AccessFSTruncate

// DeviceAccess is what the shell's devices (Devices) grant: read, write,
// truncate (`> /dev/null`), ioctl (terminals), and listing /dev/pts.
const DeviceAccess uint64 = AccessFSReadFile | AccessFSWriteFile | AccessFSTruncate | AccessFSIoctlDev | AccessFSReadDir

// FileAccess are the rights a rule on a file (not a directory) may carry.
const FileAccess uint64 = AccessFSExecute | AccessFSWriteFile | AccessFSReadFile | AccessFSTruncate | AccessFSIoctlDev

// HandledNet is what a connectTcp network sandbox restricts: TCP bind
// and connect (ABI 4).
const HandledNet uint64 = AccessNetBindTCP | AccessNetConnectTCP

// The Landlock ABI each part of a sandbox needs (docs/protocol.md §19:
// an explicit request the kernel cannot enforce fully is refused, never
// downgraded).
const (
	FSMinABI     = 5 // HandledFS: truncate (3) and ioctl on devices (5)
	NetMinABI    = 4 // TCP bind/connect
	ScopesMinABI = 6 // signal and abstract UNIX socket scopes
)

func statPath(p string) (exists, dir bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, false
	}
	return true, fi.IsDir()
}

// resolvedPath is p with its symlinks resolved (p itself if that fails).
func resolvedPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
