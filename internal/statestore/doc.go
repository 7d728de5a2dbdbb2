// Package statestore publishes and restores a session key's portable
// provider state (PROTOCOL §10.2): a set of named sources (directories or
// single files) archived, compressed, encrypted and stored under the key,
// with the key's ownership fenced by conditional writes of a small head
// object. It imports nothing of internal/adapter or internal/session; the
// session actor calls it.
//
// # Use
//
//	s, _ := statestore.Open(ctx, statestore.Options{URL: "file:///var/lib/acpx/state", Key: key, Owner: owner})
//	l, r, _ := s.AcquireRestore(ctx, sessionKey, need, targets, scratchDir) // verify the head's archive, then head generation+1, owner = us, then place it
//	r, _ = s.Restore(ctx, l, targets, scratchDir)  // later (a revive): the head's archive, with our own lease
//	p, _ := s.Publish(ctx, l, sources)             // at retire / close / turn
//	_ = s.Discard(ctx, l)                          // discardPersistentState
//
// Acquire takes a key over without restoring. An open restores with
// AcquireRestore, which verifies what it will restore before it writes
// the head (conditionally on the head it verified): an archive that fails
// its checks refuses the open with the key's owner untouched.
//
// # Objects
//
// Per session key, under the store's root (file://) or prefix (s3://):
//
//	keys/<enc>/head                             the Head (JSON)
//	keys/<enc>/archives/<generation>-<16 hex>   archive objects, never reused
//
// <enc> is internal/store.EncodeKey of the key with "." also
// percent-encoded. A file:// store keeps exactly these names as files (0600
// in 0700 directories), plus keys/<enc>/.lock (the flock of head writes)
// and .tmp-* files while a write is in progress.
//
// # Archive format
//
// A tar (archive/tar) of each source under its name ("codex-home/…",
// "claude.json"), in strictly increasing component order, followed by the
// manifest entry ".acpx-manifest": one JSON line per entry {t, p, m, s, h,
// l} (type, path, mode, size, SHA-256, link target), spooled to an unlinked
// temp file while archiving so memory does not grow with the entries.
// Regular files, directories and symlinks whose clean relative target
// resolves inside the same source and is not itself a link (nor reached
// through one) are archived; devices, fifos, sockets and other links are
// skipped and listed (Publication.Skipped). Only permission bits (0o777)
// and whole-second mtimes are kept. The tar is compressed by
// klauspost/compress/zstd (fastest level, 1 MiB window, synchronous) and
// sealed by tink's StreamingAEAD AES256_GCM_HKDF_4KB under a fresh
// per-object keyset, itself encrypted by AES-256-GCM (tink aead/subtle)
// under the master key; the associated data of both is the JSON
// {schema: "acpx.state.v1", sessionKey, generation}. See objectMagic for
// the header layout. The header holds no key material.
//
// A restore checks, while streaming and before anything leaves its fresh
// 0700 directory: the AEAD (truncation, reordered or swapped segments,
// another key, session key or generation all fail), every path (relative,
// clean, no NUL, under a valid source name), the order (which rules out
// duplicates and makes every parent an extracted directory, so nothing is
// created through a link; files are created O_EXCL|O_NOFOLLOW), the link
// rule, the limits (from the headers, before writing), every file's
// SHA-256 against the manifest (a streaming merge of the archive's manifest
// with the lines the restore wrote for what it found), and the whole
// object's size and SHA-256 against the head's.
//
// # Fencing
//
// Every head write is conditional: If-None-Match: * to create, If-Match
// the etag this sidecar last wrote or read otherwise (file://: the same
// semantics under an flock, the etag being the hex SHA-256 of the head's
// bytes, written by temp file + fsync + rename + directory fsync). A
// failed condition at Publish or Discard is ErrFenced and kills the Lease.
// A head write whose outcome is unknown is never retried (the SDK's
// retryer is off for it): the head is read, and our own bytes mean it
// happened, the Lease's etag means it did not (ErrUnavailable), anything
// else ErrFenced; an unreadable head leaves the write pending, resolved
// the same way at the Lease's next call.
//
// # S3, checked against versitygw v1.8.0 (TestS3_ConditionalWritesAnswer412)
//
//   - PutObject with a stale If-Match: 412; If-None-Match: * over an
//     existing object: 412; CompleteMultipartUpload with If-None-Match: *
//     over an existing object: 412; DeleteObject with a stale If-Match:
//     412. In each case the object is unchanged.
//   - Parts sent with x-amz-checksum-sha256 are checked by the server; a
//     composite multipart upload's HeadObject (checksum mode enabled)
//     answers "base64(SHA-256 of the parts' SHA-256s)-N"
//     (TestS3_MultipartPublishVerifiedByChecksum).
//
// Read-back: an S3 publication counts once HeadObject returns the size and
// composite SHA-256 computed locally from the parts sent (one PutObject:
// the whole object's SHA-256). The server verified each part's checksum on
// receipt, so this proves the stored object is the bytes sent without
// reading 2 GB back (a GetObject and rehash would double the publication's
// time). Archive uploads are signed UNSIGNED-PAYLOAD: the signed checksum
// header protects the bytes, and neither side hashes them a second time.
// file://: the object is fsynced, re-read and hashed, then linked to its
// name (failing if the name exists) and the directory fsynced.
//
// # Memory
//
// Everything streams. A publication runs three goroutines (archive and
// hash files | compress | encrypt, hash and store) joined by rings of
// 256 KiB chunks; the S3 part buffers ((Concurrency+1) × PartSize) and the
// rings are mmapped outside the Go heap, so the garbage collector's target
// stays small; no GOGC or GOMEMLIMIT tuning is used. A restore runs two
// (fetch, hash and decrypt | decompress, extract and hash). Peak RSS
// measured by BenchmarkStatePublishRestore on the 2.87 GB, 89,100-entry
// tree against versitygw: publish 53.5–55.5 MiB, restore 32–34 MiB.
package statestore
