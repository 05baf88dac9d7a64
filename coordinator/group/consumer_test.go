package group

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// hb848 builds a ConsumerGroupHeartbeat v1 of group g.
func hb848(member string, epoch int32, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.SetVersion(1)
	r.Group, r.MemberID, r.MemberEpoch = "g", member, epoch
	if epoch == joinEpoch {
		r.RebalanceTimeoutMillis, r.SubscribedTopicNames = rebalanceMs, topics
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return r
}

func (e *testEnv) beat(r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	return e.c.ConsumerGroupHeartbeat(Client{ID: "client", Host: "/127.0.0.1"}, r)
}

func owning(resp *kmsg.ConsumerGroupHeartbeatResponse) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range resp.Assignment.Topics {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
	}
	return out
}

// count is the partitions of an assignment; none when there is none (the
// member's did not change).
func count(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) int {
	n := 0
	if a == nil {
		return 0
	}
	for _, t := range a.Topics {
		n += len(t.Partitions)
	}
	return n
}

// Each record type survives encoding and decoding, and Format prints it
// with Kafka's field names.
func TestConsumerRecordsRoundTrip(t *testing.T) {
	id := checkpoint.NewTopicID()
	recs := []*ConsumerRecord{
		{Type: keyConsumerGroup, Value: true, Epoch: 7, MetadataHash: -3, CreationTimeMs: 1700000000000},
		{Type: keyConsumerMember, MemberID: "m", Value: true, InstanceID: kmsg.StringPtr("i"), ClientID: "c", ClientHost: "/h",
			SubscribedTopicNames: []string{"a", "b"}, SubscribedTopicRegex: kmsg.StringPtr("x.*"), RebalanceTimeoutMs: 5000,
			ServerAssignor: kmsg.StringPtr("range"), Classic: &ClassicMemberMetadata{SessionTimeoutMs: 45000,
				SupportedProtocols: []ClassicProtocol{{Name: "range", Metadata: []byte{1, 2}}}}},
		{Type: keyConsumerTargetEpoch, Value: true, AssignmentEpoch: 6},
		{Type: keyConsumerTargetMember, MemberID: "m", Value: true, TopicPartitions: []TopicPartitions{{TopicID: id, Partitions: []int32{0, 2}}}},
		{Type: keyConsumerCurrentAssigment, MemberID: "m", Value: true, MemberEpoch: 6, PreviousMemberEpoch: 5, State: 1,
			AssignedPartitions:          []TopicPartitions{{TopicID: id, Partitions: []int32{0}, AssignmentEpochs: []int32{4}}},
			PartitionsPendingRevocation: []TopicPartitions{{TopicID: id, Partitions: []int32{1}}}},
		{Type: keyConsumerRegex, Regex: "x.*", Value: true, Topics: []string{"xa"}, Version: 3, Timestamp: 9},
		{Type: keyConsumerMember, MemberID: "gone"}, // a tombstone
	}
	for _, rec := range recs {
		k, v := rec.record("grp")
		d, err := Decode(k, v)
		require.NoError(t, err, "type %d", rec.Type)
		require.Equal(t, "grp", d.Group)
		want := *rec
		if want.Type != keyConsumerGroup {
			want.CreationTimeMs = -1 // the decoder's default for the others
		}
		require.Equal(t, &want, d.Consumer, "type %d", rec.Type)
		fk, fv, err := Format(k, v)
		require.NoError(t, err)
		require.True(t, json.Valid([]byte(fk)), fk)
		if v == nil {
			require.Equal(t, "<DELETE>", fv)
		} else {
			require.True(t, json.Valid([]byte(fv)), fv)
		}
	}
	_, fv, err := Format(recs[4].record("grp"))
	require.NoError(t, err)
	require.Contains(t, fv, `"previousMemberEpoch":5`)
	require.Contains(t, fv, `"assignmentEpochs":[4]`)

	// Bytes that do not parse are an error, not a panic.
	k, v := recs[1].record("grp")
	for n := range len(v) {
		_, err := Decode(k, v[:n])
		require.Error(t, err, "a value cut to %d bytes", n)
	}
}

// Requests Kafka refuses are refused with its errors and messages.
func TestConsumerGroupHeartbeatValidation(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	r := hb848("", joinEpoch, "t")
	resp := e.beat(r)
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode)
	require.Equal(t, "MemberId can't be empty.", *resp.ErrorMessage)

	r = hb848("m", joinEpoch, "t")
	r.Topics = nil
	require.Equal(t, kerr.InvalidRequest.Code, e.beat(r).ErrorCode)
	r = hb848("m", joinEpoch, "t")
	r.RebalanceTimeoutMillis = -1
	require.Equal(t, kerr.InvalidRequest.Code, e.beat(r).ErrorCode)
	r = hb848("m", joinEpoch)
	r.SubscribedTopicNames = nil
	require.Equal(t, kerr.InvalidRequest.Code, e.beat(r).ErrorCode)
	r = hb848("m", -3)
	require.Equal(t, kerr.InvalidRequest.Code, e.beat(r).ErrorCode)

	r = hb848("m", joinEpoch, "t")
	r.ServerAssignor = kmsg.StringPtr("sticky")
	require.Equal(t, kerr.UnsupportedAssignor.Code, e.beat(r).ErrorCode)
	r = hb848("m", joinEpoch)
	r.SubscribedTopicRegex = kmsg.StringPtr("(")
	require.Equal(t, kerr.InvalidRegularExpression.Code, e.beat(r).ErrorCode)

	// A group that does not exist is not created by a heartbeat that is
	// not a join.
	require.Equal(t, kerr.GroupIDNotFound.Code, e.beat(hb848("m", 3)).ErrorCode)
	require.Empty(t, e.c.Groups())

	// A classic group with members is not a consumer group.
	joinAlone(t, e, "c", nil)
	r = hb848("m", joinEpoch, "t")
	r.Group = "c"
	require.Equal(t, kerr.GroupIDNotFound.Code, e.beat(r).ErrorCode)
}

// A member at a stale epoch is fenced; one retrying at its previous epoch
// (its last answer lost) with no more than it was given is taken back.
func TestConsumerGroupEpochs(t *testing.T) {
	e := newTestEnv(t, Options{})
	a := e.beat(hb848("a", joinEpoch, "t"))
	require.Zero(t, a.ErrorCode)
	require.Equal(t, int32(1), a.MemberEpoch)
	require.Equal(t, 3, count(a.Assignment))

	b := e.beat(hb848("b", joinEpoch, "t"))
	require.Zero(t, b.ErrorCode)
	require.Equal(t, 0, count(b.Assignment), "b waits until a revokes")
	require.Equal(t, int32(2), b.MemberEpoch)

	// a is told to revoke (it stays at epoch 1), and acknowledges by
	// reporting what it still owns.
	r := hb848("a", 1)
	r.Topics = owning(a)
	a2 := e.beat(r)
	require.Zero(t, a2.ErrorCode)
	require.Equal(t, int32(1), a2.MemberEpoch)
	kept := count(a2.Assignment)
	require.Less(t, kept, 3)
	r = hb848("a", 1)
	r.Topics = owning(a2)
	a3 := e.beat(r)
	require.Equal(t, int32(2), a3.MemberEpoch)

	// b gets the rest now.
	b2 := e.beat(hb848("b", 2))
	require.Zero(t, b2.ErrorCode)
	require.Equal(t, 3-kept, count(b2.Assignment))

	// a retrying at epoch 1 with what it owns is answered; at epoch 1
	// owning more than it has, or at epoch 0 without a join, it is
	// fenced.
	r = hb848("a", 1)
	r.Topics = owning(a2)
	require.Zero(t, e.beat(r).ErrorCode)
	r = hb848("a", 1)
	r.Topics = owning(a)
	require.Equal(t, kerr.FencedMemberEpoch.Code, e.beat(r).ErrorCode)
	require.Equal(t, kerr.FencedMemberEpoch.Code, e.beat(hb848("b", 7)).ErrorCode)
	require.Equal(t, kerr.UnknownMemberID.Code, e.beat(hb848("nobody", 2)).ErrorCode)
}

// A member whose session ends is removed; one that does not revoke within
// its rebalance timeout is fenced, and its partitions go to the others.
func TestConsumerGroupTimeouts(t *testing.T) {
	e := newTestEnv(t, Options{ConsumerSessionTimeout: 10 * time.Second})
	a := e.beat(hb848("a", joinEpoch, "t"))
	require.Equal(t, 3, count(a.Assignment))
	e.beat(hb848("b", joinEpoch, "t"))
	// a never acknowledges the revocation: after the rebalance timeout it
	// is fenced, though its heartbeats (without owned partitions) kept
	// its session.
	for range 4 {
		e.clock.Advance(4 * time.Second)
		require.Zero(t, e.beat(hb848("b", 2)).ErrorCode)
		if r := e.beat(hb848("a", 1)); r.ErrorCode != 0 {
			require.Equal(t, kerr.UnknownMemberID.Code, r.ErrorCode)
		}
	}
	d := describe848(e)
	require.Len(t, d.Members, 1)
	require.Equal(t, "b", d.Members[0].MemberID)
	require.Len(t, d.Members[0].Assignment.TopicPartitions, 1)
	require.Len(t, d.Members[0].Assignment.TopicPartitions[0].Partitions, 3)

	// b's session ends.
	e.clock.Advance(11 * time.Second)
	d = describe848(e)
	require.Empty(t, d.Members)
	require.Equal(t, "Empty", d.State)
}

// A static member that leaves for a while keeps its partitions; its next
// incarnation takes them over, and the old one is fenced. Joining with
// an instance id another live member holds is UNRELEASED_INSTANCE_ID.
func TestConsumerGroupStaticMembers(t *testing.T) {
	e := newTestEnv(t, Options{})
	r := hb848("s1", joinEpoch, "t")
	r.InstanceID = kmsg.StringPtr("inst")
	s1 := e.beat(r)
	require.Equal(t, 3, count(s1.Assignment))
	other := e.beat(hb848("o", joinEpoch, "t"))
	require.Zero(t, other.ErrorCode)

	r = hb848("s2", joinEpoch, "t")
	r.InstanceID = kmsg.StringPtr("inst")
	require.Equal(t, kerr.UnreleasedInstanceID.Code, e.beat(r).ErrorCode)

	leave := hb848("s1", staticLeaveEpoch)
	leave.InstanceID = kmsg.StringPtr("inst")
	resp := e.beat(leave)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, int32(staticLeaveEpoch), resp.MemberEpoch)
	// Its partitions stay its own: o still gets nothing.
	require.Equal(t, 0, count(e.beat(hb848("o", other.MemberEpoch)).Assignment))

	s2 := e.beat(r)
	require.Zero(t, s2.ErrorCode)
	require.NotZero(t, count(s2.Assignment), "the new incarnation keeps partitions of the old one")
	old := hb848("s1", 1)
	old.InstanceID = kmsg.StringPtr("inst")
	require.Equal(t, kerr.FencedInstanceID.Code, e.beat(old).ErrorCode)
	d := describe848(e)
	require.Len(t, d.Members, 2)
}

// Offset commits to a consumer group: a member's at its epoch through
// OffsetCommit v9; at an older epoch only for partitions it held then
// (KIP-1251); a member's through v8 is UNSUPPORTED_VERSION; without a
// member only while the group is empty.
func TestConsumerGroupOffsetCommits(t *testing.T) {
	e := newTestEnv(t, Options{})
	a := e.beat(hb848("a", joinEpoch, "t"))
	commit := func(member string, epoch int32, version int16, parts ...int32) *kmsg.OffsetCommitResponse {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.SetVersion(version)
		r.Group, r.MemberID, r.Generation = "g", member, epoch
		rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
		for _, p := range parts {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 5})
		}
		r.Topics = append(r.Topics, rt)
		return e.c.OffsetCommit(r)
	}
	code := func(resp *kmsg.OffsetCommitResponse, i int) int16 { return resp.Topics[0].Partitions[i].ErrorCode }
	require.Zero(t, code(commit("a", 1, 9, 0, 1, 2), 0))
	require.Equal(t, kerr.UnsupportedVersion.Code, code(commit("a", 1, 8, 0), 0))
	require.Equal(t, kerr.StaleMemberEpoch.Code, code(commit("a", 2, 9, 0), 0))
	require.Equal(t, kerr.UnknownMemberID.Code, code(commit("", -1, 9, 0), 0))
	require.Equal(t, kerr.UnknownMemberID.Code, code(commit("x", 1, 9, 0), 0))

	// b joins; a revokes some and moves to epoch 2 keeping the rest: a
	// commit of a kept partition at epoch 1 is accepted, one of a partition
	// it no longer holds is stale.
	e.beat(hb848("b", joinEpoch, "t"))
	r := hb848("a", 1)
	r.Topics = owning(a)
	a2 := e.beat(r)
	r = hb848("a", 1)
	r.Topics = owning(a2)
	require.Equal(t, int32(2), e.beat(r).MemberEpoch)
	keptNow := a2.Assignment.Topics[0].Partitions
	kept, gone := keptNow[0], int32(-1)
	for p := range int32(3) {
		if !slices.Contains(keptNow, p) {
			gone = p
		}
	}
	require.NotEqual(t, int32(-1), gone)
	resp := commit("a", 1, 9, kept, gone)
	require.Zero(t, code(resp, 0))
	require.Equal(t, kerr.StaleMemberEpoch.Code, code(resp, 1))

	// Empty, the group takes an admin's commit.
	e.beat(hb848("a", leaveEpoch))
	e.beat(hb848("b", leaveEpoch))
	require.Zero(t, code(commit("", -1, 9, 0), 0))
}

// A regular expression subscription follows the topics: a topic created
// that matches gives the group a new epoch and its partitions.
func TestConsumerGroupRegexFollowsTopics(t *testing.T) {
	e := newTestEnv(t, Options{})
	r := hb848("a", joinEpoch)
	r.SubscribedTopicRegex = kmsg.StringPtr("o.*")
	e.topic("orders", 2)
	e.topic("xorders", 2) // the whole name must match
	a := e.beat(r)
	require.Zero(t, a.ErrorCode)
	require.Equal(t, 2, count(a.Assignment))
	e.topic("other", 3)
	a2 := e.beat(hb848("a", a.MemberEpoch))
	require.Greater(t, a2.MemberEpoch, a.MemberEpoch)
	require.Equal(t, 5, count(a2.Assignment))
	d := describe848(e)
	require.Equal(t, "o.*", *d.Members[0].SubscribedTopicRegex)
	// After a restart the regular expression is resolved again: nothing
	// changes while the topics do not.
	e.restart()
	a3 := e.beat(hb848("a", a2.MemberEpoch))
	require.Zero(t, a3.ErrorCode)
	require.Equal(t, a2.MemberEpoch, a3.MemberEpoch)
}

// The range assignor splits each topic in ranges, alike for topics of the
// same partitions (co-partitioning); the uniform one balances and keeps
// partitions where they were.
func TestAssignors(t *testing.T) {
	ida, idb := checkpoint.NewTopicID(), checkpoint.NewTopicID()
	in := assignInput{members: []string{"m1", "m2"},
		subscribed: map[string]map[string]bool{"m1": {"a": true, "b": true}, "m2": {"a": true, "b": true}},
		topics:     []assignTopic{{"a", ida, 3}, {"b", idb, 3}}}
	out := assignRange(in)
	require.Equal(t, []int32{0, 1}, out["m1"][ida])
	require.Equal(t, []int32{0, 1}, out["m1"][idb])
	require.Equal(t, []int32{2}, out["m2"][ida])
	require.Equal(t, []int32{2}, out["m2"][idb])

	out = assignUniform(in)
	require.Equal(t, 3, out["m1"].count())
	require.Equal(t, 3, out["m2"].count())
	// A third member: each keeps two of its three, the newcomer gets one
	// from each.
	in.previous = out
	in.members = append(in.members, "m3")
	in.subscribed["m3"] = map[string]bool{"a": true, "b": true}
	next := assignUniform(in)
	for _, m := range []string{"m1", "m2", "m3"} {
		require.Equal(t, 2, next[m].count(), m)
	}
	for _, m := range []string{"m1", "m2"} {
		require.Equal(t, 2, next[m].filter(out[m].has).count(), "%s keeps two of its partitions", m)
	}
	// Subscriptions that differ: only a subscriber of a topic gets it.
	in.subscribed["m3"] = map[string]bool{"b": true}
	next = assignUniform(in)
	require.Empty(t, next["m3"][ida])
	require.Equal(t, 6, next["m1"].count()+next["m2"].count()+next["m3"].count())

	_, err := ParseAssignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform")
	require.NoError(t, err)
	_, err = ParseAssignors("sticky")
	require.Error(t, err)
}

// Groups change type only while empty: an empty classic group (offsets
// only) becomes a consumer group on a heartbeat, an empty consumer group a
// classic one on a JoinGroup; a consumer group with members refuses a
// JoinGroup. DescribeGroups, ListGroups and DeleteGroups see the type.
func TestConsumerGroupTypes(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	require.Zero(t, commitOne(e, "g", "", -1, "t", 5, ""))
	a := e.beat(hb848("a", joinEpoch, "t"))
	require.Zero(t, a.ErrorCode)

	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	lg.TypesFilter = []string{"consumer"}
	groups := e.c.ListGroups(lg).Groups
	require.Len(t, groups, 1)
	require.Equal(t, "consumer", groups[0].GroupType)
	require.Equal(t, "Stable", groups[0].GroupState)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g"}
	described := e.c.DescribeGroups(dg).Groups[0]
	require.Equal(t, "consumer", described.ProtocolType)
	require.Equal(t, "uniform", described.Protocol)
	require.Len(t, described.Members, 1)
	var as kmsg.ConsumerMemberAssignment
	require.NoError(t, as.ReadFrom(described.Members[0].MemberAssignment))
	require.Equal(t, []int32{0, 1, 2}, as.Topics[0].Partitions)

	info, ok := e.c.Describe("g")
	require.True(t, ok)
	require.Equal(t, "consumer", info.Type)
	require.Len(t, info.Members[0].Assigned, 3)
	require.Len(t, info.Offsets, 1, "the classic group's offsets stay")

	jr := (&simMember{name: "x"}).joinRequest()
	jr.Group, jr.MemberID = "g", "x"
	require.Equal(t, kerr.InconsistentGroupProtocol.Code, e.c.JoinGroup(context.Background(), Client{}, jr).ErrorCode)
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{"g"}
	require.Equal(t, kerr.NonEmptyGroup.Code, e.c.DeleteGroups(dr).Groups[0].ErrorCode)

	require.Zero(t, e.beat(hb848("a", leaveEpoch)).ErrorCode)
	e.restart()
	require.Equal(t, "Empty", describe848(e).State)
	joinAlone(t, e, "g", nil)
	info, _ = e.c.Describe("g")
	require.Equal(t, "classic", info.Type)
	e.restart()
	info, _ = e.c.Describe("g")
	require.Equal(t, "classic", info.Type, "after a restart too")
	require.Equal(t, kerr.GroupIDNotFound.Code, describe848(e).ErrorCode)

	// An empty consumer group is deleted, for good.
	require.Equal(t, kerr.GroupIDNotFound.Code, e.beat(hb848("b", joinEpoch, "t")).ErrorCode, "g has a classic member")
	require.Zero(t, e.beat(func() *kmsg.ConsumerGroupHeartbeatRequest { r := hb848("b", joinEpoch, "t"); r.Group = "h"; return r }()).ErrorCode)
	leave := hb848("b", leaveEpoch)
	leave.Group = "h"
	require.Zero(t, e.beat(leave).ErrorCode)
	dr.Groups = []string{"h"}
	require.Zero(t, e.c.DeleteGroups(dr).Groups[0].ErrorCode)
	e.restart()
	_, ok = e.c.Describe("h")
	require.False(t, ok)
}

// A classic group upgraded by a consumer protocol member keeps its classic
// member (at its generation, with its partitions) across a restart: the
// classic member's heartbeat is told to rejoin, its join gets its epoch,
// its sync its partitions; when the consumer member leaves, the group is
// classic again, rebalancing.
func TestConsumerGroupUpgradeAndDowngrade(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	classicID, gen, jr := upgradedGroup(t, e)
	// The new member is at the next epoch, waiting for the classic
	// member's partitions.
	resp := e.beat(hb848("new", gen+1))
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, gen+1, resp.MemberEpoch)
	require.Zero(t, count(resp.Assignment))
	e.restart()
	d := describe848(e)
	require.Zero(t, d.ErrorCode)
	require.Len(t, d.Members, 2)

	hr := kmsg.NewPtrHeartbeatRequest()
	hr.Group, hr.MemberID, hr.Generation = "g", classicID, gen
	require.Equal(t, kerr.RebalanceInProgress.Code, e.c.Heartbeat(hr).ErrorCode, "a new epoch to catch up on")

	// It rejoins reporting no partitions owned (an eager consumer revoked
	// them all), reaches the new epoch and syncs its share.
	joined := e.c.JoinGroup(context.Background(), Client{ID: "c"}, jr)
	require.Zero(t, joined.ErrorCode)
	require.Equal(t, gen+1, joined.Generation)
	require.Empty(t, joined.LeaderID)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", classicID, joined.Generation
	synced := e.c.SyncGroup(context.Background(), sr)
	require.Zero(t, synced.ErrorCode)
	var as kmsg.ConsumerMemberAssignment
	require.NoError(t, as.ReadFrom(synced.MemberAssignment))
	classicParts := 0
	for _, t := range as.Topics {
		classicParts += len(t.Partitions)
	}
	require.Positive(t, classicParts)
	require.Less(t, classicParts, 3)
	hr.Generation = joined.Generation
	require.Zero(t, e.c.Heartbeat(hr).ErrorCode)
	newer := e.beat(hb848("new", resp.MemberEpoch))
	require.Equal(t, 3-classicParts, count(newer.Assignment), "the new member gets the rest once released")

	// The consumer member leaves: classic again, and rebalancing.
	require.Zero(t, e.beat(hb848("new", leaveEpoch)).ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, describe848(e).ErrorCode)
	info, _ := e.c.Describe("g")
	require.Equal(t, "classic", info.Type)
	require.Equal(t, "PreparingRebalance", info.State)
	require.Equal(t, kerr.RebalanceInProgress.Code, e.c.Heartbeat(hr).ErrorCode)
	e.restart()
	info, _ = e.c.Describe("g")
	require.Equal(t, "classic", info.Type, "after a restart too")
}

// upgradedGroup makes "g" a classic group of one member holding t's three
// partitions, then upgrades it with consumer member "new": it returns the
// classic member's id and generation.
func upgradedGroup(t *testing.T, e *testEnv) (string, int32, *kmsg.JoinGroupRequest) {
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{"t"}
	jr := (&simMember{name: "solo"}).joinRequest()
	jr.Group, jr.Protocols[0].Metadata = "g", sub.AppendTo(nil)
	jr.MemberID = e.c.JoinGroup(context.Background(), Client{ID: "c"}, jr).MemberID
	joined := e.c.JoinGroup(context.Background(), Client{ID: "c"}, jr)
	require.Zero(t, joined.ErrorCode)
	all := kmsg.NewConsumerMemberAssignment()
	all.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1, 2}}}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", joined.MemberID, joined.Generation
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: joined.MemberID, MemberAssignment: all.AppendTo(nil)}}
	require.Zero(t, e.c.SyncGroup(context.Background(), sr).ErrorCode)
	require.Zero(t, e.beat(hb848("new", joinEpoch, "t")).ErrorCode)
	return joined.MemberID, joined.Generation, jr
}

// A classic member told to rejoin that keeps heartbeating but never
// rejoins is removed after its rebalance timeout; its partitions go to
// the consumer member.
func TestConsumerGroupClassicMemberMustRejoin(t *testing.T) {
	e := newTestEnv(t, Options{NoInitialDelay: true})
	id, gen, _ := upgradedGroup(t, e)
	hr := kmsg.NewPtrHeartbeatRequest()
	hr.Group, hr.MemberID, hr.Generation = "g", id, gen
	codes := map[int16]bool{}
	for range 4 {
		codes[e.c.Heartbeat(hr).ErrorCode] = true
		e.clock.Advance(4 * time.Second)
	}
	require.True(t, codes[kerr.RebalanceInProgress.Code])
	require.Equal(t, kerr.UnknownMemberID.Code, e.c.Heartbeat(hr).ErrorCode)
	d := describe848(e)
	require.Len(t, d.Members, 1)
	require.Equal(t, "new", d.Members[0].MemberID)
	require.Len(t, d.Members[0].TargetAssignment.TopicPartitions[0].Partitions, 3)
}

// A classic member that joins a consumer group owes a SyncGroup within
// its rebalance timeout (Kafka's sync timeout): one that syncs stays; one
// that only heartbeats after its join is removed, and its partitions go
// to the consumer member.
func TestConsumerGroupClassicMemberMustSync(t *testing.T) {
	for _, syncs := range []bool{true, false} {
		e := newTestEnv(t, Options{NoInitialDelay: true})
		id, _, jr := upgradedGroup(t, e)
		joined := e.c.JoinGroup(context.Background(), Client{ID: "c"}, jr)
		require.Zero(t, joined.ErrorCode)
		if syncs {
			sr := kmsg.NewPtrSyncGroupRequest()
			sr.Group, sr.MemberID, sr.Generation = "g", id, joined.Generation
			require.Zero(t, e.c.SyncGroup(context.Background(), sr).ErrorCode)
		}
		hr := kmsg.NewPtrHeartbeatRequest()
		hr.Group, hr.MemberID, hr.Generation = "g", id, joined.Generation
		for range 4 {
			e.c.Heartbeat(hr)
			e.beat(hb848("new", joined.Generation))
			e.clock.Advance(4 * time.Second)
		}
		d := describe848(e)
		if syncs {
			require.Len(t, d.Members, 2, "it synced")
			continue
		}
		require.Equal(t, kerr.UnknownMemberID.Code, e.c.Heartbeat(hr).ErrorCode)
		require.Len(t, d.Members, 1)
		require.Equal(t, "new", d.Members[0].MemberID)
	}
}
