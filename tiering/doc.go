// Package tiering moves a tablet's sealed segments to an object store and
// serves the reads below the local log start from it, so that the local
// disk holds only the hot tail.
//
//	ObjectStore ──┬── FileStore  file://DIR: temp file, fsync, link(2) under the key
//	              └── S3Store    s3://bucket/prefix?endpoint=…&region=…&path-style=true
//	                             (the AWS SDK v2; any S3-compatible endpoint)
//
// A sealed segment becomes one stream object (AutoMQ style): its batches
// copied whole into CRC-checked data blocks, a block index (base offset,
// position, size, max timestamp of each block), an aux section (the
// .txnindex entries, the producer snapshot at the segment's end, the
// leader epochs, metadata) and a 64-byte footer; a reader fetches the tail
// first (TailSize), then only the blocks it needs.
//
//	┌──────────┬──────────┬─────┬─────────────┬─────┬──────────────────┐
//	│ block 0  │ block 1  │ ... │ block index │ aux │ footer (64 bytes) │
//	└──────────┴──────────┴─────┴─────────────┴─────┴──────────────────┘
//
// The per-tablet Manifest (tier/manifest.log: length, CRC-32C, type, JSON,
// each record fsynced) is the single source of truth; an upload is PREPARE
// (fsync) → upload → size and checksum verified → COMMIT (fsync) →
// published to the tablet → the manifest mirrored to the store. A crash at
// any step leaves no visible partial object and loses no offset; uploads
// left prepared are aborted and their objects collected at the next open.
// Local segments are deleted only once committed, below the high watermark,
// past local retention and unused by readers.
//
// A Tier (Open) does this for one tablet and implements tablet.Remote;
// Attach opens the tier of every tablet of a Manager that has one (its URL
// kept in tier/store.url, never its credentials); a Service runs the steps
// of every tier in the background. The tablet never imports this package.
package tiering
