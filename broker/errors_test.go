package broker

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cleaner"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/internal/mmapfile"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/timeindex"
	"github.com/seglog/seglog/txnindex"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// kafkaCodes is every sentinel error that carries a Kafka code, with the
// kerr error a broker answers for it.
var kafkaCodes = []struct {
	err  error
	want *kerr.Error
}{
	{seglog.ErrCorruption, kerr.KafkaStorageError},
	{ErrNotServed, kerr.UnsupportedVersion},
	{ErrNoReplica, kerr.UnknownTopicOrPartition},
	{ErrNotAuthorized, kerr.TopicAuthorizationFailed},
	{record.ErrCorruptBatch, kerr.CorruptMessage},
	{record.ErrInvalidRecord, kerr.InvalidRecord},
	{record.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat},
	{record.ErrUnknownCompression, kerr.UnsupportedCompressionType},
	{record.ErrDecompressLimit, kerr.InvalidRecord},
	{record.ErrRecordTooLarge, kerr.MessageTooLarge},
	{record.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{record.ErrBuilder, kerr.InvalidRecord},
	{writerstate.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{writerstate.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{writerstate.ErrInvalidTxnState, kerr.InvalidTxnState},
	{writerstate.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{writerstate.ErrCorruptSnapshot, kerr.KafkaStorageError},
	{tablet.ErrUnexpectedAppendOffset, kerr.UnknownServerError},
	{tablet.ErrOffsetsOutOfOrder, kerr.UnknownServerError},
	{tablet.ErrNotCompacted, kerr.InvalidConfig},
	{tablet.ErrCleaningAborted, kerr.UnknownServerError},
	{tablet.ErrConfig, kerr.InvalidConfig},
	{tablet.ErrLocked, kerr.KafkaStorageError},
	{tablet.ErrNotDataDir, kerr.KafkaStorageError},
	{tablet.ErrExists, kerr.TopicAlreadyExists},
	{tablet.ErrNotFound, kerr.UnknownTopicOrPartition},
	{tablet.ErrRemoteStart, kerr.OffsetOutOfRange},
	{tablet.ErrNotSealed, kerr.UnknownServerError},
	{tablet.ErrNotEmpty, kerr.UnknownServerError},
	{tablet.ErrClosed, kerr.NotLeaderForPartition},
	{tablet.ErrFailed, kerr.KafkaStorageError},
	{tablet.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{tablet.ErrRecordBatchTooLarge, kerr.RecordListTooLarge},
	{tablet.ErrReadOnly, kerr.UnknownServerError},
	{tablet.ErrTierNotAttached, kerr.KafkaStorageError},
	{group.ErrClosed, kerr.CoordinatorNotAvailable},
	{group.ErrGroupNotFound, kerr.GroupIDNotFound},
	{group.ErrGroupNotEmpty, kerr.NonEmptyGroup},
	{tiering.ErrWrongBase, kerr.UnknownServerError},
	{tiering.ErrUnknownObject, kerr.KafkaStorageError},
	{tiering.ErrManifestFailed, kerr.KafkaStorageError},
	{tiering.ErrEmptySegment, kerr.UnknownServerError},
	{tiering.ErrNoCredentials, kerr.KafkaStorageError},
	{tiering.ErrOtherStore, kerr.UnknownServerError},
	{tiering.ErrNotFound, kerr.KafkaStorageError},
	{tiering.ErrExists, kerr.UnknownServerError},
	{tiering.ErrChecksum, kerr.KafkaStorageError},
	{tiering.ErrBadStoreURL, kerr.UnknownServerError},
	{cleaner.ErrMapTooSmall, kerr.UnknownServerError},
	{cleaner.ErrStopped, kerr.UnknownServerError},
	{segment.ErrOffsetOverflow, kerr.UnknownServerError},
	{segment.ErrReadOnly, kerr.UnknownServerError},
	{segment.ErrClosed, kerr.UnknownServerError},
	{checkpoint.ErrMalformed, kerr.KafkaStorageError},
	{offsetindex.ErrInvalidOffset, kerr.UnknownServerError},
	{offsetindex.ErrOffsetOverflow, kerr.UnknownServerError},
	{timeindex.ErrInvalidOffset, kerr.UnknownServerError},
	{timeindex.ErrTimestampDecreases, kerr.UnknownServerError},
	{timeindex.ErrOffsetOverflow, kerr.UnknownServerError},
	{txnindex.ErrLastOffsetNotIncreasing, kerr.UnknownServerError},
	{txnindex.ErrDeleted, kerr.UnknownServerError},
	{txnindex.ErrReadOnly, kerr.UnknownServerError},
	{logfile.ErrBadName, kerr.UnknownServerError},
	{mmapfile.ErrFull, kerr.UnknownServerError},
	{mmapfile.ErrReadOnly, kerr.UnknownServerError},
	{mmapfile.ErrDeleted, kerr.UnknownServerError},
	{vfs.ErrNotSupported, kerr.UnknownServerError},
	{vfs.ErrLocked, kerr.KafkaStorageError},
	{vfs.ErrInjected, kerr.KafkaStorageError},
	{vfs.ErrReadOnly, kerr.UnknownServerError},
	{ErrClosed, kerr.UnknownServerError},
	{auth.ErrUnknownMechanism, kerr.UnsupportedSaslMechanism},
	{auth.ErrEmptyUser, kerr.UnacceptableCredential},
	{auth.ErrIterations, kerr.UnacceptableCredential},
	{auth.ErrNoCredential, kerr.ResourceNotFound},
	{auth.ErrNoPrincipalRule, kerr.SaslAuthenticationFailed},
	{auth.ErrInvalidACL, kerr.InvalidRequest},
	{auth.ErrInvalidQuota, kerr.InvalidRequest},
	{auth.ErrAuthentication, kerr.SaslAuthenticationFailed},
	{auth.ErrBadCredentials, kerr.SaslAuthenticationFailed},
	{cluster.ErrTopicExists, kerr.TopicAlreadyExists},
	{cluster.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{cluster.ErrInvalidAssignment, kerr.InvalidReplicaAssignment},
	{cluster.ErrStaleState, kerr.InvalidUpdateVersion},
	{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{cluster.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{tiering.ErrFenced, kerr.NotLeaderForPartition},
	{ErrReplicationFactorChange, kerr.InvalidReplicationFactor},
	{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{docstore.ErrConflict, kerr.InvalidUpdateVersion},
	{cluster.ErrPlacement, kerr.InvalidReplicationFactor},
	{cluster.ErrClosed, kerr.UnknownServerError},
	{cluster.ErrInconsistentClusterID, kerr.InconsistentClusterID},
}

// Every sentinel carries its Kafka code, found through any wrapping, the
// same code kerr (franz-go's independent table) has for the error the
// broker means; its name is kerr's. An error with none is
// UNKNOWN_SERVER_ERROR, nil is no error.
func TestKafkaCodes(t *testing.T) {
	for _, c := range kafkaCodes {
		wrapped := fmt.Errorf("tablet t-0: appending: %w", c.err)
		require.Equal(t, c.want.Code, errorCode(wrapped), "%v", c.err)
		require.Equal(t, c.want.Code, seglog.KafkaCode(&seglog.CorruptionError{Path: "x", Err: wrapped}), "%v under a corruption", c.err)
		require.Equal(t, c.want.Message, tablet.ErrorName(wrapped), "%v", c.err)
		require.Equal(t, c.want, kerr.ErrorForCode(errorCode(c.err)), "%v: a code kerr knows", c.err)
	}
	require.Zero(t, errorCode(nil))
	require.Equal(t, kerr.UnknownServerError.Code, errorCode(fmt.Errorf("no code")))
}

// noCode are the sentinels that carry no Kafka code, and why.
var noCode = map[string]string{
	"tablet/read.go: ErrNoOffsetForTimestamp": "not a failure on the wire: ListOffsets answers offset -1",
}

// Every sentinel the engine, the coordinators and the broker declare is
// made with seglog.NewKafkaError and is in kafkaCodes (or in noCode, with
// the reason): a new sentinel without a code, or not checked here, fails.
func TestEverySentinelHasAKafkaCode(t *testing.T) {
	root := ".."
	decl := regexp.MustCompile(`\b(Err\w+)(?: error)?\s*=\s*(errors\.New|fmt\.Errorf|seglog\.NewKafkaError|NewKafkaError)\(`)
	coded := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "cmd", "bench", "examples", "testdata", ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			if m[2] == "errors.New" || m[2] == "fmt.Errorf" {
				key := rel + ": " + m[1]
				_, ok := noCode[key]
				require.True(t, ok, "%s is a sentinel without a Kafka code (seglog.NewKafkaError)", key)
				continue
			}
			coded++
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(kafkaCodes), coded, "every sentinel made with NewKafkaError is in kafkaCodes")
}

// A code Kafka does not define goes out as UNKNOWN_SERVER_ERROR (-1), and
// every code a sentinel carries is one Kafka defines.
func TestUnknownCodesGoOutAsUnknownServerError(t *testing.T) {
	for _, c := range kafkaCodes {
		require.True(t, kafkaDefines(errorCode(c.err)), "%v", c.err)
	}
	require.False(t, kafkaDefines(149))
	resp := &kmsg.MetadataResponse{Topics: []kmsg.MetadataResponseTopic{{ErrorCode: 149}, {ErrorCode: 3}}}
	before := unknownCodes.Load()
	newMetrics().knownCodes(resp)
	require.Equal(t, kerr.UnknownServerError.Code, resp.Topics[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
	unknownCodes.Add(before - unknownCodes.Load()) // this test's own is no failure
}

// A handler that panics (a bug) fails its request with an error that
// closes the connection; the broker goes on.
func TestHandlerPanicIsRecovered(t *testing.T) {
	var logged bytes.Buffer
	b := &Broker{} // no data directory: Metadata's handler dereferences nil
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	before := recoveredPanics.Load()
	resp, err := b.handleRecovering(context.Background(), header{key: 3, version: 12}, req, req.AppendTo(nil),
		slog.New(slog.NewTextHandler(&logged, nil)))
	require.Nil(t, resp)
	require.ErrorContains(t, err, "Metadata v12: the handler failed")
	require.Equal(t, before+1, recoveredPanics.Load())
	require.Contains(t, logged.String(), "a request's handler failed")
	recoveredPanics.Add(-1) // this test's own is no failure
}
