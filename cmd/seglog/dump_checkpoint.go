package main

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/vfs"
)

// isCheckpointFile reports whether dump reads name as one of the data
// directory's or a tablet's small text files.
func isCheckpointFile(name string) bool {
	switch name {
	case checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile, checkpoint.ReplicationOffsetFile,
		checkpoint.CleanerOffsetFile, checkpoint.LeaderEpochFile, checkpoint.PartitionMetadataFile,
		checkpoint.MetaPropertiesFile, checkpoint.CleanShutdownFile:
		return true
	}
	return false
}

type checkpointOffsetLine struct {
	Kind      string `json:"kind"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (l *checkpointOffsetLine) String() string {
	return fmt.Sprintf("topic: %s partition: %d offset: %d", l.Topic, l.Partition, l.Offset)
}

type epochLine struct {
	Kind        string `json:"kind"`
	Epoch       int32  `json:"epoch"`
	StartOffset int64  `json:"startOffset"`
}

func (l *epochLine) String() string {
	return fmt.Sprintf("epoch: %d startOffset: %d", l.Epoch, l.StartOffset)
}

type propertyLine struct {
	Kind  string `json:"kind"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (l *propertyLine) String() string { return fmt.Sprintf("%s: %s", l.Key, l.Value) }

// dumpCheckpoint prints an offset checkpoint (one line per tablet), a
// leader-epoch-checkpoint (one line per epoch), partition.metadata,
// meta.properties or the clean-shutdown marker (one line per field). A
// file that does not parse is a problem at the byte where it goes wrong.
func (d *dumper) dumpCheckpoint(fsys vfs.FS, path string) error {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return err
	}
	err = d.printCheckpoint(path, data)
	var ce *seglog.CorruptionError
	switch {
	case errors.As(err, &ce):
		d.problem(ce.Offset, ce.Reason)
	case errors.Is(err, checkpoint.ErrMalformed):
		d.problem(0, strings.TrimPrefix(err.Error(), checkpoint.ErrMalformed.Error()+": "))
	case err != nil:
		return err
	}
	return nil
}

func (d *dumper) printCheckpoint(path string, data []byte) error {
	property := func(k, v string) { d.emit(&propertyLine{Kind: "property", Key: k, Value: v}) }
	switch name := filepath.Base(path); name {
	case checkpoint.LeaderEpochFile:
		entries, err := checkpoint.ParseEpochs(path, data)
		for _, e := range entries {
			d.emit(&epochLine{Kind: "epoch", Epoch: e.Epoch, StartOffset: e.StartOffset})
		}
		return err
	case checkpoint.PartitionMetadataFile:
		id, err := checkpoint.ParsePartitionMetadata(path, data)
		if err == nil {
			property("version", "0")
			property("topic_id", id.String())
		}
		return err
	case checkpoint.MetaPropertiesFile:
		if _, err := checkpoint.ParseMetaProperties(path, data); err != nil {
			return err
		}
		props := checkpoint.ParseProperties(data)
		for _, k := range slices.Sorted(maps.Keys(props)) {
			property(k, props[k])
		}
		return nil
	case checkpoint.CleanShutdownFile:
		epoch, err := checkpoint.ParseCleanShutdown(path, data)
		if err == nil {
			property("version", "0")
			property("brokerEpoch", fmt.Sprint(epoch))
		}
		return err
	default:
		offsets, err := checkpoint.ParseOffsets(path, data)
		for _, tp := range slices.SortedFunc(maps.Keys(offsets), checkpoint.TopicPartition.Compare) {
			d.emit(&checkpointOffsetLine{Kind: "offset", Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
		}
		return err
	}
}
