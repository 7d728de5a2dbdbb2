package registry

import "golang.org/x/sys/unix"

// renameNoReplace renames the path oldPath to newPath unless newPath
// exists (renameat2 RENAME_NOREPLACE). Errors: the rename's (EEXIST when
// newPath exists).
func renameNoReplace(oldPath, newPath string) error {
	return unix.Renameat2(unix.AT_FDCWD, oldPath, unix.AT_FDCWD, newPath, unix.RENAME_NOREPLACE)
}
