package statestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Backend is an s3:// store (any S3-compatible server) through
// aws-sdk-go-v2: object names are prefixed by the URL's prefix. Heads are
// PutObject with If-Match (the ETag read) or If-None-Match: * and no SDK
// retry (an unknown outcome is resolved by the caller, never by a blind
// retry); archives are a PutObject (one part) or a multipart upload whose
// completion also carries If-None-Match: *, every part with its
// x-amz-checksum-sha256 (validated by the server on receipt).
type s3Backend struct {
	c        *s3.Client
	bucket   string
	prefix   string // "" or "p/"
	partSize int64
	conc     int
	timeout  time.Duration
	slots    *partSlots
}

func (b *s3Backend) kind() string { return "s3" }

func (b *s3Backend) key(name string) *string { return aws.String(b.prefix + name) }

// unsignedPayload is the per-call option of an archive upload: SigV4
// signs the headers (x-amz-checksum-sha256 among them) but not the payload
// ("UNSIGNED-PAYLOAD"), so neither the SDK nor the server hashes every
// byte a second time for the signature; the signed SHA-256 checksum header
// is what proves the bytes, and the server checks it on receipt.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// noRetry is the per-call option of a conditional write: the SDK's own
// retryer would repeat it blindly.
func noRetry(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// httpStatus returns the HTTP status of an S3 error (0 if none).
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// classify maps a failed S3 call: a missing bucket ErrUnavailable (saying
// so), 412 errPrecondition, 404 ErrNotFound, anything else as is (the
// caller wraps it as ErrUnavailable).
func classify(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
		// A 404 too, but not a missing object: nothing can be read or
		// written until the bucket exists.
		return fmt.Errorf("%w: the bucket does not exist", ErrUnavailable)
	}
	switch httpStatus(err) {
	case http.StatusPreconditionFailed:
		return errPrecondition
	case http.StatusNotFound:
		return ErrNotFound
	}
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return ErrNotFound
	}
	return err
}

func (b *s3Backend) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

func (b *s3Backend) getHead(ctx context.Context, name string) ([]byte, string, error) {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: b.key(name)})
	if err != nil {
		return nil, "", classify(err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, maxHeadBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxHeadBytes {
		return nil, "", corruptf("head over %d bytes", maxHeadBytes)
	}
	return data, aws.ToString(out.ETag), nil
}

func (b *s3Backend) putHead(ctx context.Context, name string, data []byte, ifMatch string) (string, error) {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	in := &s3.PutObjectInput{Bucket: &b.bucket, Key: b.key(name), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json")}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := b.c.PutObject(ctx, in, noRetry)
	if err != nil {
		return "", classify(err)
	}
	return aws.ToString(out.ETag), nil
}

func (b *s3Backend) deleteHead(ctx context.Context, name, ifMatch string) error {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: b.key(name), IfMatch: aws.String(ifMatch)}, noRetry)
	if err = classify(err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (b *s3Backend) getObject(ctx context.Context, name string) (io.ReadCloser, error) {
	// The download is bounded by its idle time, not its length: a read
	// that brings nothing for the request timeout cancels it.
	ctx, cancel := context.WithCancel(ctx)
	idle := time.AfterFunc(b.timeout, cancel)
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: b.key(name)})
	if err != nil {
		idle.Stop()
		cancel()
		return nil, classify(err)
	}
	return &idleBody{rc: out.Body, idle: idle, d: b.timeout, cancel: cancel}, nil
}

// idleBody is a download that is cancelled when no Read brings a byte
// within d.
type idleBody struct {
	rc     io.ReadCloser
	idle   *time.Timer
	d      time.Duration
	cancel context.CancelFunc
}

func (r *idleBody) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.idle.Reset(r.d)
	}
	if err != nil && err != io.EOF {
		err = classify(err)
	}
	return n, err
}

func (r *idleBody) Close() error {
	r.idle.Stop()
	r.cancel()
	return r.rc.Close()
}

func (b *s3Backend) list(ctx context.Context, prefix string, fn func(string) error) error {
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: b.key(prefix)})
	for p.HasMorePages() {
		octx, cancel := b.opCtx(ctx)
		page, err := p.NextPage(octx)
		cancel()
		if err != nil {
			return classify(err)
		}
		for _, o := range page.Contents {
			if err := fn(strings.TrimPrefix(aws.ToString(o.Key), b.prefix)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *s3Backend) deleteObject(ctx context.Context, name string) error {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: b.key(name)})
	if err = classify(err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (b *s3Backend) newObject(ctx context.Context, name string) (objectWriter, error) {
	slot, err := b.slots.acquire(ctx)
	if err != nil {
		return nil, err
	}
	w := &s3Object{b: b, ctx: ctx, name: name, slot: slot, free: make(chan []byte, len(slot))}
	for _, buf := range slot {
		w.free <- buf
	}
	return w, nil
}

// s3Object streams an archive into parts of partSize bytes, at most conc
// of them uploading while the next fills (the conc+1 buffers of the
// partSlots slot it holds). Each part's SHA-256 goes with it (x-amz-checksum-sha256: the
// server rejects a part whose bytes differ) and into the composite
// checksum commit compares with the stored object's.
type s3Object struct {
	b        *s3Backend
	ctx      context.Context
	name     string
	buf      []byte
	slot     [][]byte // the partSlots buffers this upload holds
	free     chan []byte
	uploadID *string
	parts    []*partResult // by part number - 1; each written by its own upload only
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
}

// partResult is one uploaded part: its ETag and SHA-256 (raw, base64).
type partResult struct {
	etag *string
	sum  [sha256.Size]byte
	b64  string
}

func (o *s3Object) getBuf() []byte { return (<-o.free)[:0] }

// done waits for the part uploads and gives the slot back (once).
func (o *s3Object) done() {
	o.wg.Wait()
	if o.slot != nil {
		o.b.slots.release(o.slot)
		o.slot = nil
	}
}

func (o *s3Object) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *s3Object) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if o.buf == nil {
			o.buf = o.getBuf()
		}
		c := copy(o.buf[len(o.buf):cap(o.buf)], p)
		o.buf = o.buf[:len(o.buf)+c]
		p = p[c:]
		n += c
		if len(o.buf) == cap(o.buf) {
			if err := o.flushPart(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flushPart starts the upload of the filled buffer as the next part.
func (o *s3Object) flushPart() error {
	if err := o.failed(); err != nil {
		return err
	}
	if o.uploadID == nil {
		ctx, cancel := o.b.opCtx(o.ctx)
		out, err := o.b.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &o.b.bucket,
			Key: o.b.key(o.name), ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeComposite})
		cancel()
		if err != nil {
			return classify(err)
		}
		o.uploadID = out.UploadId
	}
	buf := o.buf
	o.buf = nil
	num := int32(len(o.parts) + 1)
	res := &partResult{}
	o.parts = append(o.parts, res)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		sum := sha256.Sum256(buf)
		b64 := base64.StdEncoding.EncodeToString(sum[:])
		// One part's upload is bounded like a metadata request: a store
		// that hangs fails the publication, never the caller forever.
		pctx, cancel := context.WithTimeout(o.ctx, o.b.timeout)
		defer cancel()
		out, err := o.b.c.UploadPart(pctx, &s3.UploadPartInput{Bucket: &o.b.bucket, Key: o.b.key(o.name),
			UploadId: o.uploadID, PartNumber: aws.Int32(num), Body: bytes.NewReader(buf),
			ContentLength: aws.Int64(int64(len(buf))), ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: &b64}, unsignedPayload)
		if err == nil {
			res.etag, res.sum, res.b64 = out.ETag, sum, b64
		}
		o.mu.Lock()
		if err != nil && o.err == nil {
			o.err = classify(err)
		}
		o.mu.Unlock()
		o.free <- buf
	}()
	return nil
}

func (o *s3Object) commit(sum []byte, n int64) error {
	defer o.done()
	want := base64.StdEncoding.EncodeToString(sum)
	if o.uploadID == nil {
		// One part: a plain PutObject, created only if the name is free.
		buf := o.buf
		ctx, cancel := o.b.opCtx(o.ctx)
		defer cancel()
		_, err := o.b.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &o.b.bucket, Key: o.b.key(o.name),
			Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))), IfNoneMatch: aws.String("*"),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: &want}, noRetry, unsignedPayload)
		if err != nil {
			return classify(err)
		}
		return o.verify(want, n)
	}
	if len(o.buf) > 0 {
		if err := o.flushPart(); err != nil {
			o.wg.Wait()
			return err
		}
	}
	o.wg.Wait()
	if err := o.failed(); err != nil {
		return err
	}
	comp := sha256.New()
	done := make([]types.CompletedPart, len(o.parts))
	for i, r := range o.parts {
		comp.Write(r.sum[:])
		done[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: r.etag, ChecksumSHA256: aws.String(r.b64)}
	}
	composite := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(comp.Sum(nil)), len(o.parts))
	ctx, cancel := o.b.opCtx(o.ctx)
	defer cancel()
	_, err := o.b.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &o.b.bucket,
		Key: o.b.key(o.name), UploadId: o.uploadID, IfNoneMatch: aws.String("*"),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}, noRetry)
	if err != nil {
		return classify(err)
	}
	o.uploadID = nil
	return o.verify(composite, n)
}

// verify reads the stored object's size and SHA-256 checksum back
// (HeadObject with checksum mode enabled) and compares them with what was
// sent: the whole object's for a PutObject, the composite
// ("base64(sha256(part sums))-N") for a multipart upload.
func (o *s3Object) verify(want string, n int64) error {
	ctx, cancel := o.b.opCtx(o.ctx)
	defer cancel()
	out, err := o.b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &o.b.bucket, Key: o.b.key(o.name), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return classify(err)
	}
	if aws.ToInt64(out.ContentLength) != n || aws.ToString(out.ChecksumSHA256) != want {
		return fmt.Errorf("read-back of %s: %d bytes and checksum %q, want %d and %q", o.name,
			aws.ToInt64(out.ContentLength), aws.ToString(out.ChecksumSHA256), n, want)
	}
	return nil
}

func (o *s3Object) abort() {
	defer o.done()
	o.wg.Wait()
	if o.uploadID != nil {
		ctx, cancel := context.WithTimeout(context.Background(), o.b.timeout)
		defer cancel()
		o.b.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &o.b.bucket, Key: o.b.key(o.name), UploadId: o.uploadID})
		o.uploadID = nil
	}
}

// credentials asks the S3 client's credential chain for credentials once
// (bounded by the request timeout): an empty chain is a configuration
// error to report at start, not a retryable failure of the first open.
func (b *s3Backend) credentials(ctx context.Context) error {
	p := b.c.Options().Credentials
	if p == nil {
		return errors.New("no credential provider")
	}
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	_, err := p.Retrieve(ctx)
	return err
}
