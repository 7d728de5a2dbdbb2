//go:build !unix

package sandbox

// statIdentity records no identity where there is no stat(2).
func statIdentity(string) (dev, ino uint64) { return 0, 0 }
