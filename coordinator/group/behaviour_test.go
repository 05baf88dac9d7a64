package group

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// joinAlone joins a one-member group "g" (v7: the id first) and syncs it,
// returning the member id and generation.
func joinAlone(t *testing.T, e *testEnv, group string, subscription []byte) (string, int32) {
	s := &simMember{name: "solo"}
	r := s.joinRequest()
	r.Group = group
	r.Protocols[0].Metadata = subscription
	resp := e.c.JoinGroup(context.Background(), Client{ID: "c"}, r)
	require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
	r.MemberID = resp.MemberID
	resp = e.c.JoinGroup(context.Background(), Client{ID: "c"}, r)
	require.Zero(t, resp.ErrorCode)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = group, resp.MemberID, resp.Generation
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: resp.MemberID, MemberAssignment: []byte("all")}}
	require.Zero(t, e.c.SyncGroup(context.Background(), sr).ErrorCode)
	return resp.MemberID, resp.Generation
}

func commitOne(e *testEnv, group, member string, gen int32, topic string, off int64, meta string) int16 {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(8)
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: off, LeaderEpoch: -1, Metadata: kmsg.StringPtr(meta)}}}}
	return e.c.OffsetCommit(r).Topics[0].Partitions[0].ErrorCode
}

// txnCommit commits, in producer pid's transaction (epoch 0, no member:
// v3), offsets[i] for partition i of topic t, and returns each
// partition's code.
func txnCommit(e *testEnv, group string, pid int64, offsets ...int64) []int16 {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.SetVersion(3)
	r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = group, pid, 0, -1
	rt := kmsg.TxnOffsetCommitRequestTopic{Topic: "t"}
	for p, o := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitRequestTopicPartition{Partition: int32(p), Offset: o, LeaderEpoch: -1})
	}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	var codes []int16
	for _, p := range e.c.TxnOffsetCommit(r).Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	return codes
}

func fetchOne(e *testEnv, group string) int64 {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.SetVersion(7)
	r.Group = group
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	return e.c.OffsetFetch(r).Topics[0].Partitions[0].Offset
}

// Kafka's checks on joins and commits.
func TestGroupRefusals(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true, MaxSize: 1})
	s := &simMember{name: "x"}
	r := s.joinRequest()
	r.SessionTimeoutMillis = 1000
	require.Equal(t, kerr.InvalidSessionTimeout.Code, e.c.JoinGroup(context.Background(), Client{}, r).ErrorCode)
	r = s.joinRequest()
	r.Group = ""
	require.Equal(t, kerr.InvalidGroupID.Code, e.c.JoinGroup(context.Background(), Client{}, r).ErrorCode)
	r = s.joinRequest()
	r.MemberID = "nobody"
	require.Equal(t, kerr.UnknownMemberID.Code, e.c.JoinGroup(context.Background(), Client{}, r).ErrorCode)

	id, gen := joinAlone(t, e, "g", []byte("sub"))
	r = s.joinRequest()
	require.Equal(t, kerr.GroupMaxSizeReached.Code, e.c.JoinGroup(context.Background(), Client{}, r).ErrorCode)
	r.ProtocolType = "connect"
	require.Equal(t, kerr.InconsistentGroupProtocol.Code, e.c.JoinGroup(context.Background(), Client{}, r).ErrorCode)

	require.Equal(t, kerr.IllegalGeneration.Code, commitOne(e, "g", id, gen+1, "t", 5, ""))
	require.Equal(t, kerr.UnknownMemberID.Code, commitOne(e, "g", "other", gen, "t", 5, ""))
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, commitOne(e, "g", id, gen, "absent", 5, ""))
	require.Equal(t, kerr.OffsetMetadataTooLarge.Code, commitOne(e, "g", id, gen, "t", 5, string(make([]byte, 4097))))
	require.Zero(t, commitOne(e, "g", id, gen, "t", 5, "m"))
	require.Equal(t, int64(5), fetchOne(e, "g"))

	dg := e.c.DeleteGroups(&kmsg.DeleteGroupsRequest{Groups: []string{"g", "absent"}})
	require.Equal(t, kerr.NonEmptyGroup.Code, dg.Groups[0].ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, dg.Groups[1].ErrorCode)
}

// A member that stops heartbeating is removed after its session timeout,
// and the group, empty, keeps its offsets for offsets.retention.minutes
// after that; then they expire and the group is deleted — durably.
func TestSessionExpiryAndOffsetRetention(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true, Retention: time.Hour})
	id, gen := joinAlone(t, e, "g", nil)
	require.Zero(t, commitOne(e, "g", id, gen, "t", 42, ""))
	e.clock.Advance(sessionMs*time.Millisecond - time.Millisecond)
	require.Equal(t, Stable, e.c.groups["g"].state, "the session has not ended")
	e.clock.Advance(time.Millisecond)
	require.Equal(t, Empty, e.c.groups["g"].state, "expired, rebalanced to empty")
	require.Equal(t, int64(1), e.c.Stats().Expired)

	e.clock.Advance(59 * time.Minute)
	require.Zero(t, e.c.ExpireOffsets())
	require.Equal(t, int64(42), fetchOne(e, "g"))
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, e.c.ExpireOffsets(), "an hour after the group became empty")
	require.Equal(t, int64(-1), fetchOne(e, "g"))
	require.Nil(t, e.c.groups["g"], "the empty group without offsets is gone")
	e.restart()
	require.Nil(t, e.c.groups["g"], "and stays gone: its tombstones were written")
}

// The initial rebalance delay holds an empty group's first rebalance
// while members keep coming, then completes it with all of them.
func TestInitialRebalanceDelay(t *testing.T) {
	e := newTestEnv(t, Options{InitialRebalanceDelay: 3 * time.Second})
	var waits []chan *kmsg.JoinGroupResponse
	for i := range 3 {
		s := &simMember{name: "m"}
		r := s.joinRequest()
		r.SetVersion(3) // no MEMBER_ID_REQUIRED
		resp, ch := e.c.join(Client{ID: "c"}, r)
		require.Nil(t, resp)
		waits = append(waits, ch)
		e.clock.Advance(2 * time.Second)
		if i < 2 {
			require.Equal(t, PreparingRebalance, e.c.groups["g"].state, "a new member extends the delay")
		}
	}
	e.clock.Advance(3 * time.Second)
	require.Equal(t, CompletingRebalance, e.c.groups["g"].state)
	leaders := 0
	for _, ch := range waits {
		resp := <-ch
		require.Zero(t, resp.ErrorCode)
		require.Equal(t, int32(1), resp.Generation, "one rebalance for the three")
		if resp.LeaderID == resp.MemberID {
			leaders++
			require.Len(t, resp.Members, 3)
		}
	}
	require.Equal(t, 1, leaders)
}

// OffsetDelete refuses the topics a consumer group's members subscribe
// to, and deletes the others.
func TestOffsetDelete(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	for p := range int32(1) {
		_, err := e.m.GetOrCreate(tpOf("u", p), nil)
		require.NoError(t, err)
	}
	meta := kmsg.ConsumerMemberMetadata{Version: 0, Topics: []string{"t"}}
	id, gen := joinAlone(t, e, "g", meta.AppendTo(nil))
	require.Zero(t, commitOne(e, "g", id, gen, "t", 1, ""))
	require.Zero(t, commitOne(e, "g", id, gen, "u", 2, ""))
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = "g"
	r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp := e.c.OffsetDelete(r)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, kerr.GroupSubscribedToTopic.Code, resp.Topics[0].Partitions[0].ErrorCode)
	require.Zero(t, resp.Topics[1].Partitions[0].ErrorCode)
	e.restart()
	g := e.c.groups["g"]
	require.Len(t, g.offsets, 1, "u's offset is deleted, durably")
}

// __consumer_offsets is compacted: after many commits the cleaner keeps
// the last of each key, and a restart loads the same offsets from what is
// left.
func TestOffsetsTopicIsCompacted(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true, Partitions: 1, SegmentBytes: 4096})
	id, gen := joinAlone(t, e, "g", nil)
	for i := range 300 {
		require.Zero(t, commitOne(e, "g", id, gen, "t", int64(i), ""))
	}
	tab, ok := e.m.Get(tpOf(Topic, 0))
	require.True(t, ok)
	size := func() (n int64) {
		for _, s := range tab.Segments() {
			n += s.Size
		}
		return n
	}
	before := size()
	res, err := tab.Clean(tablet.CleanOptions{})
	require.NoError(t, err)
	require.Positive(t, res.RecordsRemoved, "old commits of the same key are cleaned away")
	require.Less(t, size(), before)
	e.restart()
	require.Equal(t, int64(299), fetchOne(e, "g"))
	require.Equal(t, Stable, e.c.groups["g"].state, "the group metadata survives the cleaning")
}

// A member's subscription and assignment are the coordinator's own copies:
// the request bytes they came in (the connection's frame buffer, reused
// for the next request) may change after the request is answered.
func TestMemberBytesOutliveTheRequest(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	sub := []byte("subscription")
	id, gen := joinAlone(t, e, "g", sub)
	copy(sub, "XXXXXXXXXXXX") // the frame buffer reused
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", id, gen
	got := e.c.SyncGroup(context.Background(), sr)
	require.Equal(t, "all", string(got.MemberAssignment), "the assignment joinAlone's leader sync stored")
	described := e.c.DescribeGroups(&kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
	require.Equal(t, "subscription", string(described.Groups[0].Members[0].ProtocolMetadata))
}

// A static leader rejoining a stable group whose protocol does not change
// (KIP-345) keeps the generation. From JoinGroup v9 (KIP-814) it is told
// it leads, with the members, and to skip the assignment; before v9 it
// gets the leader as it was (its old id) and no members, so it does not
// think it must assign. Either way its SyncGroup returns its assignment.
func TestStaticLeaderRejoinSkipsAssignment(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	s := &simMember{name: "static", instance: "inst"}
	r := s.joinRequest()
	r.SetVersion(9)
	first := e.c.JoinGroup(context.Background(), Client{ID: "c"}, r)
	require.Zero(t, first.ErrorCode)
	require.Equal(t, first.MemberID, first.LeaderID)
	require.False(t, first.SkipAssignment, "a first join assigns")
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", first.MemberID, first.Generation
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: first.MemberID, MemberAssignment: []byte("mine")}}
	require.Zero(t, e.c.SyncGroup(context.Background(), sr).ErrorCode)

	again := e.c.JoinGroup(context.Background(), Client{ID: "c"}, r) // v9, no member id: a restart
	require.Zero(t, again.ErrorCode)
	require.Equal(t, first.Generation, again.Generation, "no rebalance")
	require.NotEqual(t, first.MemberID, again.MemberID)
	require.Equal(t, again.MemberID, again.LeaderID, "told it leads")
	require.True(t, again.SkipAssignment)
	require.Len(t, again.Members, 1)

	r.SetVersion(8)
	old := e.c.JoinGroup(context.Background(), Client{ID: "c"}, r)
	require.Zero(t, old.ErrorCode)
	require.Equal(t, again.MemberID, old.LeaderID, "the leader as it was")
	require.NotEqual(t, old.MemberID, old.LeaderID)
	require.Empty(t, old.Members)
	require.False(t, old.SkipAssignment)
	sr.MemberID, sr.GroupAssignment = old.MemberID, nil
	synced := e.c.SyncGroup(context.Background(), sr)
	require.Zero(t, synced.ErrorCode)
	require.Equal(t, []byte("mine"), synced.MemberAssignment)
}

// A coordinator loading in the background answers at once: a group whose
// partition is not loaded yet is COORDINATOR_LOAD_IN_PROGRESS (ListGroups
// too), and a transaction marker written meanwhile applies once its
// partition's groups are installed.
func TestBackgroundLoad(t *testing.T) {
	e := newTestEnv(t, Options{})
	require.Equal(t, int16(0), commitOne(e, "g1", "", -1, "t", 42, "m"))
	require.Equal(t, []int16{0}, txnCommit(e, "g2", 7, 77))
	require.Equal(t, int64(-1), fetchOne(e, "g2"), "pending until its transaction commits")

	release := make(chan struct{})
	e.opts.LoadInBackground = true
	e.opts.loadHook = func(int32) { <-release }
	e.restart()
	f := kmsg.NewPtrOffsetFetchRequest()
	f.SetVersion(7)
	f.Group = "g1"
	require.Equal(t, kerr.CoordinatorLoadInProgress.Code, e.c.OffsetFetch(f).ErrorCode)
	require.Equal(t, kerr.CoordinatorLoadInProgress.Code, commitOne(e, "g1", "", -1, "t", 43, ""))
	require.Equal(t, kerr.CoordinatorLoadInProgress.Code, e.c.ListGroups(kmsg.NewPtrListGroupsRequest()).ErrorCode)
	select {
	case <-e.c.Loaded():
		t.Fatal("loaded while its partitions are held")
	default:
	}
	// The transaction commits while g2's partition loads.
	e.c.OnMarker(checkpoint.TopicPartition{Topic: Topic, Partition: PartitionFor("g2", e.opts.Partitions)}, 7, true)
	close(release)
	<-e.c.Loaded()
	require.Equal(t, int64(42), fetchOne(e, "g1"))
	require.Equal(t, int64(77), fetchOne(e, "g2"), "the marker written while loading applied")
	require.Equal(t, int16(0), e.c.ListGroups(kmsg.NewPtrListGroupsRequest()).ErrorCode)
	require.Equal(t, int16(0), commitOne(e, "g1", "", -1, "t", 43, ""))
	require.Equal(t, int64(43), fetchOne(e, "g1"))
}

// A transaction's pending offsets: OffsetFetch with require_stable
// answers UNSTABLE_OFFSET_COMMIT (no offset) for its partitions, asked by
// name and as one of every partition (topics null, which kadm sends) —
// the latter answered the last stable offset instead, which let a test
// read a group's offsets before the last transaction's markers landed;
// without require_stable, the last stable offset; committed, the new one.
func TestRequireStable(t *testing.T) {
	e := newTestEnv(t, Options{})
	require.Equal(t, int16(0), commitOne(e, "g", "", -1, "t", 5, ""))
	require.Equal(t, []int16{0, 0}, txnCommit(e, "g", 7, 9, 3))
	fetch := func(stable, all bool) map[int32]kmsg.OffsetFetchResponseTopicPartition {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.SetVersion(7)
		f.Group, f.RequireStable = "g", stable
		if !all {
			f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		}
		resp := e.c.OffsetFetch(f)
		require.Zero(t, resp.ErrorCode)
		out := map[int32]kmsg.OffsetFetchResponseTopicPartition{}
		for _, rt := range resp.Topics {
			require.Equal(t, "t", rt.Topic)
			for _, p := range rt.Partitions {
				out[p.Partition] = p
			}
		}
		return out
	}
	for _, all := range []bool{false, true} {
		got := fetch(true, all)
		require.Len(t, got, 2, "every=%v", all)
		for p, rp := range got {
			require.Equal(t, kerr.UnstableOffsetCommit.Code, rp.ErrorCode, "every=%v partition %d", all, p)
			require.Equal(t, int64(-1), rp.Offset)
		}
		got = fetch(false, all)
		require.Equal(t, int64(5), got[0].Offset, "every=%v: the last stable offset", all)
		require.Zero(t, got[0].ErrorCode)
	}
	e.c.OnMarker(checkpoint.TopicPartition{Topic: Topic, Partition: PartitionFor("g", e.opts.Partitions)}, 7, true)
	got := fetch(true, true)
	require.Zero(t, got[0].ErrorCode)
	require.Equal(t, int64(9), got[0].Offset)
	require.Equal(t, int64(3), got[1].Offset)
}
