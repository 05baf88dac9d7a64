package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/record"
)

// browseLimit is how many records the message browser shows at once, and
// browseBytes what one of its fetches may read.
const (
	browseLimit = 50
	browseBytes = 1 << 20
)

// shown is a key, value or header value as the browser shows it.
type shown struct {
	Null   bool
	Format string // "json", "utf-8" or "hex"
	Text   string
	Size   int
}

type shownHeader struct {
	Key   string
	Value shown
}

// message is one record of the browser.
type message struct {
	Offset    int64
	Timestamp string
	Key       shown
	Value     shown
	Headers   []shownHeader
	// The batch: its first offset, producer and codec.
	BatchBase     int64
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
	Codec         string
}

// browse is the message browser page's data.
type browse struct {
	Topic      string
	Partitions []int32
	Partition  int32
	From       string // "offset", "time" or "end"
	Offset     int64
	Time       string
	Committed  bool
	Format     string // "auto", "utf-8", "hex"
	Start      int64  // the first offset read
	LogStart   int64
	HW, LSO    int64
	Messages   []message
	Next       int64 // the offset after the last shown, for the next page
	More       bool
}

func (c *Console) messages(ctx context.Context, r *http.Request) (string, view, error) {
	name := r.PathValue("topic")
	md, err := c.metadata(ctx, r, name)
	if err != nil {
		return "", view{}, err
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		code := kerr.UnknownTopicOrPartition.Code
		if len(md.Topics) == 1 {
			code = md.Topics[0].ErrorCode
		}
		return "", view{}, fmt.Errorf("topic %q: %s: %w", name, kerr.ErrorForCode(code).Error(), errNotFound)
	}
	t := md.Topics[0]
	q := r.URL.Query()
	br := browse{Topic: name, From: q.Get("from"), Committed: q.Get("isolation") != "uncommitted", Format: q.Get("format")}
	for _, p := range t.Partitions {
		br.Partitions = append(br.Partitions, p.Partition)
	}
	if br.Format != "utf-8" && br.Format != "hex" {
		br.Format = "auto"
	}
	if v := q.Get("partition"); v != "" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return "", view{}, fmt.Errorf("partition %q: %w", v, errBadRequest)
		}
		br.Partition = int32(p)
	}
	if !slices.Contains(br.Partitions, br.Partition) {
		return "", view{}, fmt.Errorf("topic %q has no partition %d: %w", name, br.Partition, errNotFound)
	}
	isolation := int8(0)
	if br.Committed {
		isolation = 1
	}
	// Where the partition is: log start, high watermark, last stable offset.
	rows := []topicRow{{Name: name, Partitions: []partitionRow{{Partition: br.Partition, LogStart: -1, HW: -1, LSO: -1}}}}
	if err := c.fillOffsets(ctx, r, rows); err != nil {
		return "", view{}, err
	}
	p := rows[0].Partitions[0]
	br.LogStart, br.HW, br.LSO = p.LogStart, p.HW, p.LSO
	end := br.HW
	if br.Committed {
		end = br.LSO
	}
	switch br.From {
	case "time":
		br.Time = q.Get("time")
		ts, err := time.ParseInLocation(timeLayout, br.Time, time.UTC)
		if err != nil {
			return "", view{}, fmt.Errorf("time %q (YYYY-MM-DDThh:mm, UTC): %w", br.Time, errBadRequest)
		}
		if br.Start, err = c.offsetForTime(ctx, r, name, br.Partition, ts.UnixMilli(), isolation); err != nil {
			return "", view{}, err
		}
		if br.Start < 0 {
			br.Start = end // nothing at or after it
		}
	case "end":
		br.Start = max(end-browseLimit, br.LogStart)
	default:
		br.From = "offset"
		br.Offset = br.LogStart
		if v := q.Get("offset"); v != "" {
			if br.Offset, err = strconv.ParseInt(v, 10, 64); err != nil {
				return "", view{}, fmt.Errorf("offset %q: %w", v, errBadRequest)
			}
		}
		br.Start = max(br.Offset, br.LogStart)
	}
	if err := c.readMessages(ctx, r, t.TopicID, &br, isolation, end); err != nil {
		return "", view{}, err
	}
	return "messages", view{Title: "Messages of " + name, Nav: "topics", Data: br}, nil
}

// offsetForTime is ListOffsets by time: the first offset whose timestamp
// is at or after ts, or -1.
func (c *Console) offsetForTime(ctx context.Context, r *http.Request, topic string, partition int32, ts int64, isolation int8) (int64, error) {
	rows := []topicRow{{Name: topic, Partitions: []partitionRow{{Partition: partition}}}}
	offset, answer := int64(-1), fmt.Errorf("ListOffsets of %s-%d answered nothing of it", topic, partition)
	if err := c.listOffsets(ctx, r, rows, ts, isolation, func(_ *partitionRow, o int64, err error) { offset, answer = o, err }); err != nil {
		return 0, err
	}
	return offset, answer
}

// readMessages fetches from the partition's leader from br.Start until
// browseLimit records or end, as a consumer of the isolation level reads
// them (read committed: the aborted transactions' records left out), and
// fills br.Messages.
func (c *Console) readMessages(ctx context.Context, r *http.Request, topicID [16]byte, br *browse, isolation int8, end int64) error {
	leader, err := c.leaderOf(ctx, r, br.Topic, br.Partition)
	if err != nil {
		return err
	}
	offset := br.Start
	var it record.Iter
	for len(br.Messages) < browseLimit && offset < end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = -1, 0, 1, browseBytes, isolation
		req.SessionEpoch = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = br.Topic, topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = br.Partition, offset, browseBytes, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := c.requestTo(ctx, r, leader, req)
		if err != nil {
			return err
		}
		fr := resp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
			return err
		}
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return fmt.Errorf("a fetch of %s-%d answered %d topics", br.Topic, br.Partition, len(fr.Topics))
		}
		fp2 := fr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp2.ErrorCode); err != nil {
			return err
		}
		aborted := newAbortedSet(fp2.AbortedTransactions)
		before := offset
		for data := fp2.RecordBatches; len(data) > 0 && len(br.Messages) < browseLimit; {
			b, rest, err := record.ParseBatch(data)
			if err != nil {
				break // a batch cut short by MaxBytes: the next fetch starts at it
			}
			data = rest
			if b.LastOffset() < offset {
				continue
			}
			if aborted.skip(b) {
				offset = b.NextOffset()
				continue
			}
			if b.IsControl() {
				offset = b.NextOffset()
				continue
			}
			it.Reset(b, record.DefaultMaxUncompressed)
			for it.Next() && len(br.Messages) < browseLimit {
				rec := it.Record()
				if rec.Offset < offset || rec.Offset >= end {
					continue
				}
				br.Messages = append(br.Messages, c.show(b, rec, br.Format))
				offset = rec.Offset + 1
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("the batch at offset %d: %w", b.BaseOffset(), err)
			}
			if len(br.Messages) < browseLimit {
				offset = max(offset, b.NextOffset())
			}
		}
		if offset == before {
			break // nothing more to read (an empty answer, or a batch larger than a fetch)
		}
	}
	br.Next, br.More = offset, offset < end
	return nil
}

// abortedSet is read committed's filter, as a consumer applies it: a
// transactional batch of a producer whose aborted transaction began at or
// before it is skipped until that producer's ABORT marker.
type abortedSet struct {
	pending []kmsg.FetchResponseTopicPartitionAbortedTransaction
	open    map[int64]bool
}

func newAbortedSet(a []kmsg.FetchResponseTopicPartitionAbortedTransaction) *abortedSet {
	return &abortedSet{pending: a, open: map[int64]bool{}}
}

func (s *abortedSet) skip(b record.Batch) bool {
	for i := 0; i < len(s.pending); {
		if s.pending[i].FirstOffset <= b.LastOffset() {
			s.open[s.pending[i].ProducerID] = true
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			continue
		}
		i++
	}
	if !b.IsTransactional() || !s.open[b.ProducerID()] {
		return false
	}
	if b.IsControl() {
		delete(s.open, b.ProducerID()) // its marker ends the aborted transaction
	}
	return true
}

func (c *Console) show(b record.Batch, r *record.Record, format string) message {
	m := message{Offset: r.Offset, Key: showBytes(r.Key, format), Value: showBytes(r.Value, format),
		BatchBase: b.BaseOffset(), ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(),
		Transactional: b.IsTransactional(), Codec: b.Compression().String()}
	if r.Timestamp >= 0 {
		m.Timestamp = time.UnixMilli(r.Timestamp).UTC().Format("2006-01-02 15:04:05.000")
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, shownHeader{Key: string(h.Key), Value: showBytes(h.Value, format)})
	}
	return m
}

// showBytes renders b: as pretty-printed JSON when it is JSON, as text
// when it is printable UTF-8, else (or when asked) as hex.
func showBytes(b []byte, format string) shown {
	s := shown{Null: b == nil, Size: len(b)}
	switch {
	case b == nil:
	case format == "hex":
		s.Format, s.Text = "hex", hex.EncodeToString(b)
	case format == "auto" && json.Valid(b) && len(bytes.TrimSpace(b)) > 0 && (b[0] == '{' || b[0] == '['):
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			s.Format, s.Text = "json", out.String()
			break
		}
		fallthrough
	case printable(b):
		s.Format, s.Text = "utf-8", string(b)
	default:
		s.Format, s.Text = "hex", hex.EncodeToString(b)
	}
	return s
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// timeLayout is how the forms take a time (UTC), as a datetime-local
// input sends it.
const timeLayout = "2006-01-02T15:04"
