package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// Limits bound one archive, enforced while streaming both ways (PROTOCOL
// §10.2 `--state-max-bytes`, `--state-max-entries`,
// `--state-max-file-bytes`): MaxBytes is the total of file contents in
// bytes, MaxEntries the number of directories, files and links (the
// sources' roots included), MaxFileBytes one file's size in bytes. A value
// ≤ 0 takes the default.
type Limits struct {
	// MaxBytes, MaxEntries and MaxFileBytes: content bytes, entries and
	// one file's bytes, as above; ≤ 0 takes DefaultLimits' value.
	MaxBytes, MaxEntries, MaxFileBytes int64
}

// DefaultLimits returns 4 GiB, 200000 entries and 1 GiB per file (PROTOCOL
// §10.2).
func DefaultLimits() Limits {
	return Limits{MaxBytes: 4 << 30, MaxEntries: 200000, MaxFileBytes: 1 << 30}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	return l
}

// Owner names the sidecar that owns a key, as written in its head
// (PROTOCOL §10.2 `owner: {sidecarId, hostname}`).
type Owner struct {
	// SidecarID is the owning sidecar's identity.
	SidecarID string `json:"sidecarId"`
	// Hostname is the host the owning sidecar runs on.
	Hostname string `json:"hostname"`
}

// DefaultTimeout bounds each request to an S3 store when Options.Timeout
// is not set: a head read or write, a list, a delete, one part's upload,
// a download idle that long.
const DefaultTimeout = 30 * time.Second

// Options configure Open.
type Options struct {
	// URL is the store (PROTOCOL §10.2 `--state-store`):
	// "file:///abs/dir" or
	// "s3://bucket/prefix?endpoint=http://host:port&region=R&pathStyle=true"
	// (endpoint, region and pathStyle optional).
	URL string
	// Key is the master key (required); OldKey, if set, is tried second
	// when opening an archive (`--state-old-key-file`, read only).
	Key MasterKey
	// OldKey is the previous master key, tried after Key when opening an
	// archive, never used to seal one; nil (or a zero key): none.
	OldKey *MasterKey
	// Limits of every archive (zero fields: DefaultLimits).
	Limits Limits
	// Owner is written into every head this Store writes.
	Owner Owner
	// PartSize of an S3 multipart upload in bytes (default 8 MiB, at least
	// 5 MiB); Concurrency the parts uploading at once while the next one
	// fills (default 1, at most 8). Memory for an upload is
	// (Concurrency+1)*PartSize, outside the Go heap. The default keeps a
	// 2.87 GB publication under 64 MiB of peak RSS and was as fast on
	// loopback as Concurrency 2 (BenchmarkStatePublishRestore: 14.3 s vs
	// 15.8 s, 57.6 vs 65.3 MiB); a distant store may want 2. Uploads
	// (default 2) archive uploads run at once per Store; more wait for one
	// to end.
	PartSize int64
	// Concurrency is the number of parts of one S3 upload in flight at
	// once, 1–8 (0: 1); see PartSize.
	Concurrency int
	// Uploads is the number of archive uploads one S3 Store runs at once
	// (≤ 0: 2); see PartSize.
	Uploads int
	// Timeout bounds each metadata request to S3 (head read or write,
	// list, delete, multipart create/complete, read-back): default 30 s.
	Timeout time.Duration
	// ScratchDir holds a publication's manifest spool (an unlinked temp
	// file): default os.TempDir().
	ScratchDir string
	// HTTPClient, if set, carries the S3 requests (tests inject faults
	// here); nil is the SDK's default client.
	HTTPClient aws.HTTPClient
}

// Store is an opened state store. Its methods are safe for concurrent use;
// a Lease's operations are serialized on the Lease.
type Store struct {
	b       backend
	key     MasterKey
	keys    []MasterKey
	lim     Limits
	owner   Owner
	scratch string
	now     func() time.Time
}

// Open opens the store named by o.URL. file:///abs/dir: the directory is
// created (0700) if missing. s3://bucket/prefix: credentials come only
// from the process's own environment through config.LoadDefaultConfig (the
// AWS SDK's standard chain, PROTOCOL §10.2); the region from the URL, else
// the SDK's configuration, else "us-east-1". Open does not contact S3.
// Errors: ErrBadKey (zero Key), ErrInvalid (a URL that is not one of the
// two forms, naming the problem), or the mkdir/config error.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Key.IsZero() {
		return nil, fmt.Errorf("%w: no master key", ErrBadKey)
	}
	s := &Store{key: o.Key, keys: []MasterKey{o.Key}, lim: o.Limits.withDefaults(), owner: o.Owner,
		scratch: o.ScratchDir, now: time.Now}
	if o.OldKey != nil && !o.OldKey.IsZero() {
		s.keys = append(s.keys, *o.OldKey)
	}
	if s.scratch == "" {
		s.scratch = os.TempDir()
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: store URL: %v", ErrInvalid, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: store URL: file:// takes only an absolute path (file:///abs/dir)", ErrInvalid)
		}
		if !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("%w: store URL: file path %q is not absolute", ErrInvalid, u.Path)
		}
		root := filepath.Clean(u.Path)
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, fmt.Errorf("statestore: %w", err)
		}
		s.b = &fileBackend{root: root}
	case "s3":
		b, err := openS3(ctx, u, o)
		if err != nil {
			return nil, err
		}
		s.b = b
	default:
		return nil, fmt.Errorf("%w: store URL: scheme %q, want file:// or s3://", ErrInvalid, u.Scheme)
	}
	return s, nil
}

func openS3(ctx context.Context, u *url.URL, o Options) (*s3Backend, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: store URL: s3:// needs a bucket (s3://bucket/prefix)", ErrInvalid)
	}
	b := &s3Backend{bucket: u.Host, partSize: o.PartSize, conc: o.Concurrency, timeout: o.Timeout}
	if p := strings.Trim(u.Path, "/"); p != "" {
		b.prefix = p + "/"
	}
	if b.partSize == 0 {
		b.partSize = 8 << 20
	}
	if b.partSize < 5<<20 {
		return nil, fmt.Errorf("%w: S3 part size %d is under 5 MiB", ErrInvalid, b.partSize)
	}
	if b.conc == 0 {
		b.conc = 1
	}
	if b.conc < 1 || b.conc > 8 {
		return nil, fmt.Errorf("%w: S3 concurrency %d, want 1-8", ErrInvalid, b.conc)
	}
	if b.timeout <= 0 {
		b.timeout = DefaultTimeout
	}
	uploads := o.Uploads
	if uploads <= 0 {
		uploads = 2
	}
	b.slots = newPartSlots(uploads, b.conc+1, b.partSize)
	q := u.Query()
	var endpoint, region string
	pathStyle := false
	for k, v := range q {
		if len(v) != 1 {
			return nil, fmt.Errorf("%w: store URL: %q given %d times", ErrInvalid, k, len(v))
		}
		switch k {
		case "endpoint":
			e, err := url.Parse(v[0])
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return nil, fmt.Errorf("%w: store URL: endpoint %q is not an http(s)://host[:port] URL", ErrInvalid, v[0])
			}
			endpoint = v[0]
		case "region":
			region = v[0]
		case "pathStyle":
			ps, err := strconv.ParseBool(v[0])
			if err != nil {
				return nil, fmt.Errorf("%w: store URL: pathStyle %q is not true or false", ErrInvalid, v[0])
			}
			pathStyle = ps
		default:
			return nil, fmt.Errorf("%w: store URL: unknown parameter %q (endpoint, region, pathStyle)", ErrInvalid, k)
		}
	}
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("statestore: S3 configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	b.c = s3.NewFromConfig(cfg, func(so *s3.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
		so.UsePathStyle = pathStyle
		if o.HTTPClient != nil {
			so.HTTPClient = o.HTTPClient
		}
		// Checksums are ours (x-amz-checksum-sha256 on every part).
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return b, nil
}

// Kind is "file" or "s3" (`initialize.capabilities.stateStore.kind`).
func (s *Store) Kind() string { return s.b.kind() }

// KeyID is the master key's MasterKey.ID (`stateStore.keyId`).
func (s *Store) KeyID() string { return s.key.ID() }

// maxHeadBytes bounds a head object read.
const maxHeadBytes = 64 << 10

// ArchiveRef names one archive object in a head (PROTOCOL §10.2 `archive:
// {object, sha256, bytes, entries}`): Object its name in the store
// ("keys/<enc>/archives/<generation>-<16 hex>"), SHA256 the hex SHA-256 of
// the whole object, Bytes its size in bytes, Entries the archive's entries,
// Generation the head generation it was sealed for (its associated data).
type ArchiveRef struct {
	// Object is the archive's object name in the store.
	Object string `json:"object"`
	// SHA256 is the hex SHA-256 of the whole object (64 characters).
	SHA256 string `json:"sha256"`
	// Bytes is the object's size in bytes.
	Bytes int64 `json:"bytes"`
	// Entries is the number of entries in the archive.
	Entries int64 `json:"entries"`
	// Generation is the head generation the archive was sealed for (≥ 1).
	Generation int64 `json:"generation"`
}

// Head is a key's head object (PROTOCOL §10.2 "Fencing"), stored as this
// JSON: {schema: "acpx.state.v1", generation, owner: {sidecarId,
// hostname}, archive: ArchiveRef|null, previous: ArchiveRef|null,
// publishedAt: RFC 3339 time|null}. Generation grows by one with every
// write (an Acquire or a Publish); Archive is what a restore fetches,
// Previous the one before (tried when Archive is corrupt).
type Head struct {
	// Schema is always Schema ("acpx.state.v1").
	Schema string `json:"schema"`
	// Generation is the head's generation (≥ 1).
	Generation int64 `json:"generation"`
	// Owner is the sidecar that wrote this head.
	Owner Owner `json:"owner"`
	// Archive is the newest published archive; nil before any Publish.
	Archive *ArchiveRef `json:"archive"`
	// Previous is the archive published before Archive; nil if none.
	Previous *ArchiveRef `json:"previous"`
	// PublishedAt is when Archive was published (UTC); nil before any
	// Publish.
	PublishedAt *time.Time `json:"publishedAt"`
}

func (h Head) clone() Head {
	if h.Archive != nil {
		a := *h.Archive
		h.Archive = &a
	}
	if h.Previous != nil {
		p := *h.Previous
		h.Previous = &p
	}
	if h.PublishedAt != nil {
		t := *h.PublishedAt
		h.PublishedAt = &t
	}
	return h
}

// decodeHead parses a head of key directory keyDir; ErrCorrupt if it is
// not a valid head or names an object outside the key's archives.
func decodeHead(b []byte, keyDir string) (Head, error) {
	var h Head
	if err := json.Unmarshal(b, &h); err != nil {
		return Head{}, corruptf("head: %v", err)
	}
	if h.Schema != Schema || h.Generation < 1 {
		return Head{}, corruptf("head: schema %q, generation %d", h.Schema, h.Generation)
	}
	for _, r := range []*ArchiveRef{h.Archive, h.Previous} {
		if r == nil {
			continue
		}
		if !strings.HasPrefix(r.Object, keyDir+"/archives/") || len(r.SHA256) != 64 || r.Generation < 1 || r.Bytes < 0 {
			return Head{}, corruptf("head: bad archive reference %q", r.Object)
		}
	}
	return h, nil
}

// keyDir returns "keys/<enc>" for a session key: internal/store's
// EncodeKey (encodeURIComponent) with every "." also percent-encoded, so no
// encoded key is "." or ".." or starts with a dot. Errors: ErrInvalid for a
// key store.ValidateKey refuses or whose encoding is over 240 bytes.
func keyDir(sessionKey string) (string, error) {
	if err := store.ValidateKey(sessionKey); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	enc := strings.ReplaceAll(store.EncodeKey(sessionKey), ".", "%2E")
	if len(enc) > 240 {
		return "", fmt.Errorf("%w: session key encodes to %d bytes, limit 240", ErrInvalid, len(enc))
	}
	return "keys/" + enc, nil
}

// ReadHead returns the key's head as stored (for status and
// diagnostics). Errors: ErrNotFound (no head), ErrCorrupt, ErrUnavailable,
// ErrInvalid (bad key).
func (s *Store) ReadHead(ctx context.Context, sessionKey string) (*Head, error) {
	kd, err := keyDir(sessionKey)
	if err != nil {
		return nil, err
	}
	raw, _, err := s.b.getHead(ctx, kd+"/head")
	if err != nil {
		return nil, s.storeErr("read head", err)
	}
	h, err := decodeHead(raw, kd)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// storeErr passes the sentinels through and wraps the rest as
// ErrUnavailable.
func (s *Store) storeErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case isSentinel(err):
		return err
	}
	return unavailable(op, err)
}

func isSentinel(err error) bool {
	for _, e := range []error{ErrNotFound, ErrCorrupt, ErrTooLarge, ErrFenced, ErrUnavailable, ErrInvalid, errPrecondition} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// CheckCredentials makes sure an s3:// store has credentials in the
// process's environment (the AWS SDK's standard chain: AWS_ACCESS_KEY_ID…,
// a shared credentials file, an instance role), so a sidecar without any
// refuses to start instead of failing every open later as retryable
// (issue 29's trial). file:// needs none: nil. Errors: ErrInvalid naming
// the chain's complaint (never a secret).
func (s *Store) CheckCredentials(ctx context.Context) error {
	b, ok := s.b.(*s3Backend)
	if !ok {
		return nil
	}
	if err := b.credentials(ctx); err != nil {
		return fmt.Errorf("%w: no S3 credentials in the sidecar's environment (the AWS SDK's chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a shared credentials file, an instance role): %v", ErrInvalid, err)
	}
	return nil
}
