package main

import (
	"errors"
	"fmt"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

type producerLine struct {
	Kind                  string `json:"kind"`
	ProducerID            int64  `json:"producerId"`
	ProducerEpoch         int16  `json:"producerEpoch"`
	CoordinatorEpoch      int32  `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64  `json:"currentTxnFirstOffset"`
	LastTimestamp         int64  `json:"lastTimestamp"`
	FirstSequence         int32  `json:"firstSequence"`
	LastSequence          int32  `json:"lastSequence"`
	LastOffset            int64  `json:"lastOffset"`
	OffsetDelta           int32  `json:"offsetDelta"`
	Timestamp             int64  `json:"timestamp"`
}

func (l *producerLine) String() string {
	return fmt.Sprintf("producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %d "+
		"lastTimestamp: %d firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
		l.ProducerID, l.ProducerEpoch, l.CoordinatorEpoch, l.CurrentTxnFirstOffset, l.LastTimestamp,
		l.FirstSequence, l.LastSequence, l.LastOffset, l.OffsetDelta, l.Timestamp)
}

func (d *dumper) dumpSnapshot(fsys vfs.FS, path string) error {
	entries, err := writerstate.ReadSnapshotFile(fsys, path)
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		d.problem(ce.Offset, ce.Err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		d.emit(&producerLine{Kind: "producer", ProducerID: e.ProducerID, ProducerEpoch: e.Epoch,
			CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnFirstOffset: e.CurrentTxnFirstOffset,
			LastTimestamp: e.LastTimestamp, FirstSequence: e.FirstSeq(), LastSequence: e.LastSeq(),
			LastOffset: e.LastDataOffset(), OffsetDelta: e.LastOffsetDelta(), Timestamp: e.LastTimestamp})
	}
	return nil
}
