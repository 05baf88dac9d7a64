package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/writerstate"
)

// isObjectArg reports whether a dump argument names a stream object: a
// .seg path, or a file:// or s3:// URL of one.
func isObjectArg(arg string) bool {
	return strings.HasPrefix(arg, "s3://") || strings.HasPrefix(arg, "file://") || filepath.Ext(arg) == ".seg"
}

// openObjectArg returns the store and key of a dump argument: a local
// path (its directory is the store), file:///path, or
// s3://bucket/key?endpoint=…&region=…&path-style=… (credentials from the
// AWS chain).
func openObjectArg(ctx context.Context, arg string) (tiering.ObjectStore, string, error) {
	if strings.HasPrefix(arg, "s3://") {
		u, err := url.Parse(arg)
		if err != nil {
			return nil, "", fmt.Errorf("%s is not a URL", tiering.RedactURL(arg))
		}
		key := strings.TrimPrefix(u.Path, "/")
		u.Path = ""
		s, err := tiering.OpenStore(ctx, u.String(), nil)
		return s, key, err
	}
	path := strings.TrimPrefix(arg, "file://")
	s, err := tiering.OpenFileStore(filepath.Dir(path))
	return s, filepath.Base(path), err
}

type objectLine struct {
	Kind       string `json:"kind"`
	Key        string `json:"key"`
	Size       int64  `json:"size"`
	BaseOffset int64  `json:"baseOffset"`
	EndOffset  int64  `json:"endOffset"`
	Blocks     int    `json:"blocks"`
	tiering.ObjectMeta
	AbortedTxns int `json:"abortedTxns"`
	Producers   int `json:"producers"`
	Epochs      int `json:"epochs"`
}

func (l *objectLine) String() string {
	return fmt.Sprintf("stream object %s: %d bytes, offsets [%d, %d), %d blocks, topic %s partition %d, "+
		"max timestamp %d, segment size %d, created %d, %d aborted transaction(s), %d producer(s), %d epoch(s)",
		l.Key, l.Size, l.BaseOffset, l.EndOffset, l.Blocks, l.Topic, l.Partition, l.MaxTimestamp, l.ObjectMeta.Size,
		l.CreatedMs, l.AbortedTxns, l.Producers, l.Epochs)
}

type blockLine struct {
	Kind         string `json:"kind"`
	Index        int    `json:"index"`
	BaseOffset   int64  `json:"baseOffset"`
	LastOffset   int64  `json:"lastOffset"`
	Batches      int32  `json:"batches"`
	Position     int64  `json:"position"`
	Size         int32  `json:"size"`
	MaxTimestamp int64  `json:"maxTimestamp"`
}

func (l *blockLine) String() string {
	return fmt.Sprintf("block %d: offsets [%d, %d] batches: %d position: %d size: %d maxTimestamp: %d",
		l.Index, l.BaseOffset, l.LastOffset, l.Batches, l.Position, l.Size, l.MaxTimestamp)
}

// dumpObject prints a stream object: its footer and aux sections, each
// block (CRC checked) and the batches in it.
func (d *dumper) dumpObject(ctx context.Context, arg string) error {
	s, key, err := openObjectArg(ctx, arg)
	if err != nil {
		return err
	}
	info, err := s.Head(ctx, key)
	if err != nil {
		return err
	}
	o, err := tiering.FetchObject(ctx, s, key, info.Size)
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		d.problem(ce.Offset, ce.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	producers := 0
	if len(o.Snapshot) > 0 {
		entries, err := writerstate.ParseSnapshot(o.Snapshot)
		if err != nil {
			d.problem(-1, "the producer snapshot section: "+err.Error())
		}
		producers = len(entries)
	}
	d.emit(&objectLine{Kind: "object", Key: key, Size: info.Size, BaseOffset: o.BaseOffset, EndOffset: o.EndOffset,
		Blocks: len(o.Blocks), ObjectMeta: o.Meta, AbortedTxns: len(o.Aborted), Producers: producers, Epochs: len(o.Epochs)})
	for i, e := range o.Blocks {
		d.emit(&blockLine{Kind: "block", Index: i, BaseOffset: e.BaseOffset, LastOffset: e.LastOffset(), Batches: e.BatchCount,
			Position: e.Position, Size: e.Size, MaxTimestamp: e.MaxTimestamp})
		raw, err := s.GetRange(ctx, key, e.Position, int(e.Size))
		if err != nil {
			return err
		}
		data, err := o.ParseBlock(i, raw)
		if errors.As(err, &ce) {
			d.problem(ce.Offset, ce.Reason)
			continue
		}
		if err != nil {
			return err
		}
		pos := e.Position + int64(len(raw)-len(data))
		for len(data) > 0 {
			b, rest, err := record.ParseBatch(data)
			if err != nil {
				d.problem(pos, "unreadable batch: "+err.Error())
				break
			}
			d.batch(pos, b)
			pos += int64(b.Size())
			data = rest
		}
	}
	return nil
}
