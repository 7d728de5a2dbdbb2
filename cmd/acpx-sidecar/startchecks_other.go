//go:build !linux

package main

// renameNoReplaceMissing is "" off Linux: the stores use no renameat2
// there.
func renameNoReplaceMissing(string) string { return "" }
