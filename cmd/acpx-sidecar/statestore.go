package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
)

// stateFlags are the portable provider state's flags (docs/protocol.md
// §24, after PROTOCOL §10.2).
type stateFlags struct {
	url, keyFile, oldKeyFile string
	maxBytes, maxEntries     int64
	maxFileBytes             int64
	timeoutMs                int64
}

// register adds the flags to fs, defaults from statestore.DefaultLimits.
func (f *stateFlags) register(fs *flag.FlagSet) {
	d := statestore.DefaultLimits()
	fs.StringVar(&f.url, "state-store", "", "where provider state is published: file:///abs/dir or s3://bucket/prefix?endpoint=…&region=…&pathStyle=true (credentials from the sidecar's environment, the AWS SDK's chain); empty: nothing is published (docs/protocol.md §24)")
	fs.StringVar(&f.keyFile, "state-key-file", "", "the 32-byte master key (raw or base64), mode 0600 or stricter; required with --state-store")
	fs.StringVar(&f.oldKeyFile, "state-old-key-file", "", "the previous master key, tried second when an archive is read (key rotation); same rules")
	fs.Int64Var(&f.maxBytes, "state-max-bytes", d.MaxBytes, "largest provider state one archive holds (file contents), bytes")
	fs.Int64Var(&f.maxEntries, "state-max-entries", d.MaxEntries, "most directories, files and links one archive holds")
	fs.Int64Var(&f.maxFileBytes, "state-max-file-bytes", d.MaxFileBytes, "largest file one archive holds, bytes")
	fs.Int64Var(&f.timeoutMs, "state-timeout-ms", statestore.DefaultTimeout.Milliseconds(), "bound of each request to the state store (a head, a part of an archive, a download idle that long), ms")
}

// check validates the flags as parsed.
func (f *stateFlags) check() error {
	switch {
	case f.url == "" && (f.keyFile != "" || f.oldKeyFile != ""):
		return fmt.Errorf("--state-key-file and --state-old-key-file need --state-store")
	case f.url != "" && f.keyFile == "":
		return fmt.Errorf("--state-store needs --state-key-file (the master key)")
	case f.maxBytes < 1 || f.maxEntries < 1 || f.maxFileBytes < 1:
		return fmt.Errorf("--state-max-bytes, --state-max-entries and --state-max-file-bytes must be positive")
	case f.timeoutMs < 1 || f.timeoutMs > 3600000:
		return fmt.Errorf("--state-timeout-ms must be 1-3600000")
	}
	return nil
}

// open opens the store the flags name, nil when --state-store is empty.
// A key file that is missing, not a regular file, readable by group or
// others, or not 32 bytes (raw or base64) refuses the start; its bytes
// never reach an error. The owner written into the heads is a random id
// for this process and the machine's hostname.
func (f *stateFlags) open(ctx context.Context) (*statestore.Store, error) {
	if f.url == "" {
		return nil, nil
	}
	key, err := statestore.LoadKeyFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--state-key-file: %v", err)
	}
	o := statestore.Options{URL: f.url, Key: key,
		Limits:  statestore.Limits{MaxBytes: f.maxBytes, MaxEntries: f.maxEntries, MaxFileBytes: f.maxFileBytes},
		Owner:   statestore.Owner{SidecarID: sidecarID(), Hostname: hostname()},
		Timeout: time.Duration(f.timeoutMs) * time.Millisecond}
	if f.oldKeyFile != "" {
		old, err := statestore.LoadKeyFile(f.oldKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--state-old-key-file: %v", err)
		}
		o.OldKey = &old
	}
	st, err := statestore.Open(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("--state-store: %v", err)
	}
	if err := st.CheckCredentials(ctx); err != nil {
		return nil, fmt.Errorf("--state-store: %v", err)
	}
	return st, nil
}

// openWithCredentials is open, plus what of the store's access no agent
// may get (statestore.Store.Credentials; the zero Credentials without a
// store or for file://): a store whose credentials cannot be resolved
// refuses the start as CheckCredentials does.
func (f *stateFlags) openWithCredentials(ctx context.Context) (*statestore.Store, statestore.Credentials, error) {
	st, err := f.open(ctx)
	if err != nil || st == nil {
		return st, statestore.Credentials{}, err
	}
	creds, err := st.Credentials(ctx)
	if err != nil {
		return nil, statestore.Credentials{}, fmt.Errorf("--state-store: %v", err)
	}
	return st, creds, nil
}

// secretPaths are what no provider-state directory may be, hold or lie
// in (config.Config.StateSecrets): the key files and a file:// store's
// root; nil without --state-store.
func (f *stateFlags) secretPaths() []string {
	var out []string
	for _, k := range f.keyPaths() {
		// The file the kernel opens (links resolved before a ".."
		// after them), else the path cleaned.
		if r, err := filepath.EvalSymlinks(k); err == nil {
			k = r
		}
		out = append(out, filepath.Clean(k))
	}
	if root := f.fileRoot(); root != "" {
		out = append(out, root)
	}
	return out
}

// keyPaths are the master key files as the flags name them, made
// absolute but not cleaned (nil without --state-store): no sandboxed tree
// may read or replace them (admission.SandboxConfig.Secrets, which
// resolves each as the kernel does and records the links on its way).
// Cleaning the text first would drop a "dir/.." that follows a link and
// name another file (found in review).
func (f *stateFlags) keyPaths() []string {
	if f.url == "" {
		return nil
	}
	var out []string
	for _, k := range []string{f.keyFile, f.oldKeyFile} {
		if k == "" {
			continue
		}
		if !filepath.IsAbs(k) {
			wd, err := os.Getwd()
			if err != nil {
				continue
			}
			k = wd + string(filepath.Separator) + k
		}
		out = append(out, k)
	}
	return out
}

// fileRoot is a file:// store's root directory, "" for none or an s3://
// store: never writable by a sandboxed tree
// (admission.SandboxConfig.StoreDir).
func (f *stateFlags) fileRoot() string {
	if u, err := url.Parse(f.url); err == nil && f.url != "" && u.Scheme == "file" && filepath.IsAbs(u.Path) {
		return filepath.Clean(u.Path)
	}
	return ""
}

// preflight is doctor's check of the flags (nil, nil without
// --state-store): the key files loaded and the store opened and its
// credentials checked as the daemon does at start, bounded by
// --state-timeout-ms — err is the one the daemon would exit with —, then
// the store reached (statestore.Store.Probe): unreachable says why it
// cannot be read now (a refused signature, a missing bucket, an endpoint
// that does not answer), which the daemon does not check at start.
func (f *stateFlags) preflight() (unreachable, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(f.timeoutMs)*time.Millisecond)
	defer cancel()
	st, err := f.open(ctx)
	if err != nil || st == nil {
		return nil, err
	}
	return st.Probe(ctx), nil
}

// sidecarID is this process's owner id in the state store: "sc-" and 16
// hex digits, fresh at every start.
func sidecarID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sc-" + hex.EncodeToString(b[:])
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
