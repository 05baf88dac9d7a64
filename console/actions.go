package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/record"
)

// Actions are the changes an operator makes from the pages: create and
// delete a topic, add partitions, change a topic config, produce a test
// record, reset a group's offsets, abort a hanging transaction. Each is a
// POST (with the CSRF token ServeHTTP checks) whose form first comes back
// as a confirmation page — what will happen, the same fields, a Confirm
// button — and is carried out only when it says confirm=yes. It goes
// through Broker.Request as the session's principal: it needs the ACL its
// Kafka API needs, and is refused as a client would be.
type action struct {
	// plan checks the form and says what the action will do.
	plan func(r *http.Request) (string, error)
	// do carries it out and says what it did; next is the page to go on to.
	do func(ctx context.Context, r *http.Request) (done, next string, err error)
}

// confirmView is a confirmation page: the action's plan and its form's
// fields, resent with confirm=yes.
type confirmView struct {
	What, Action, Back string
	Fields             []field
}

type field struct{ Name, Value string }

// resultView is an action's outcome and the page to go on to.
type resultView struct {
	Next string
	OK   bool
}

var errConflict = errors.New("refused")

func (c *Console) action(back func(r *http.Request) string, a action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			c.render(w, r, http.StatusBadRequest, "refused", view{Title: "Bad request", Message: err.Error()})
			return
		}
		what, err := a.plan(r)
		if err != nil {
			c.render(w, r, http.StatusBadRequest, "refused", view{Title: "Bad request", Message: err.Error()})
			return
		}
		if r.PostForm.Get("confirm") != "yes" {
			cv := confirmView{What: what, Action: r.URL.Path, Back: back(r)}
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range r.PostForm {
					if !yield(k) {
						return
					}
				}
			}) {
				if k == "csrf" || k == "confirm" {
					continue
				}
				for _, v := range r.PostForm[k] {
					cv.Fields = append(cv.Fields, field{k, v})
				}
			}
			c.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Data: cv})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), c.opts.Timeout)
		defer cancel()
		done, next, err := a.do(ctx, r)
		if next == "" {
			next = back(r)
		}
		if err != nil {
			c.opts.Logger.Debug("console action failed", "path", r.URL.Path, "err", err)
			c.render(w, r, actionStatus(err), "result", view{Title: "Not done", Message: err.Error(), Data: resultView{Next: next}})
			return
		}
		c.opts.Logger.Info("console action", "principal", c.caller(r).Principal, "action", what)
		c.render(w, r, http.StatusOK, "result", view{Title: "Done", Message: done, Data: resultView{Next: next, OK: true}})
	}
}

// actionStatus is the HTTP status of an action's failure: 403 for an ACL
// that refused it, 409 for a broker's refusal, 400 for a bad form.
func actionStatus(err error) int {
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return http.StatusForbidden
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errConflict), errors.As(err, &ke):
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

// codeErr is a Kafka error code with the broker's message, nil for 0.
func codeErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if m := deref(msg); m != "" {
		return fmt.Errorf("%w: %s", err, m)
	}
	return err
}

// topicIDs are the named topics' ids, for the requests that name topics
// by id at their newest versions (Produce from v13, OffsetCommit from
// v10): one Metadata.
func (c *Console) topicIDs(ctx context.Context, r *http.Request, names ...string) (map[string][16]byte, error) {
	md, err := c.metadata(ctx, r, names...)
	if err != nil {
		return nil, err
	}
	ids := make(map[string][16]byte, len(md.Topics))
	for _, t := range md.Topics {
		ids[deref(t.Topic)] = t.TopicID
	}
	return ids, nil
}

// formInt reads an integer field; a missing one is def.
func formInt(r *http.Request, name string, def int64, bits int) (int64, error) {
	v := strings.TrimSpace(r.PostForm.Get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a number: %w", name, v, errBadRequest)
	}
	return n, nil
}

// pairs reads "key=value" lines (configs, headers).
func pairs(r *http.Request, name string) ([][2]string, error) {
	var out [][2]string
	for line := range strings.Lines(r.PostForm.Get(name)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not key=value: %w", name, line, errBadRequest)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func (c *Console) registerActions() {
	topicPage := func(r *http.Request) string { return "/topics/" + r.PathValue("topic") }
	c.mux.HandleFunc("POST /topics", c.action(func(*http.Request) string { return "/topics" }, action{c.planCreateTopic, c.createTopic}))
	c.mux.HandleFunc("POST /topics/{topic}/delete", c.action(topicPage, action{
		plan: func(r *http.Request) (string, error) {
			return fmt.Sprintf("Delete topic %s and every record in it.", r.PathValue("topic")), nil
		},
		do: c.deleteTopic,
	}))
	c.mux.HandleFunc("POST /topics/{topic}/partitions", c.action(topicPage, action{c.planAddPartitions, c.addPartitions}))
	c.mux.HandleFunc("POST /topics/{topic}/config", c.action(topicPage, action{c.planAlterConfig, c.alterConfig}))
	c.mux.HandleFunc("POST /topics/{topic}/produce", c.action(topicPage, action{c.planProduce, c.produce}))
	c.mux.HandleFunc("POST /groups/{group}/reset", c.action(func(r *http.Request) string { return "/groups/" + r.PathValue("group") },
		action{c.planReset, c.resetOffsets}))
	c.mux.HandleFunc("POST /transactions/abort", c.action(func(*http.Request) string { return "/transactions" },
		action{c.planAbort, c.abort}))
}

// --- topics ---

func (c *Console) planCreateTopic(r *http.Request) (string, error) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if name == "" {
		return "", fmt.Errorf("a topic needs a name: %w", errBadRequest)
	}
	parts, err := formInt(r, "partitions", -1, 32)
	if err != nil {
		return "", err
	}
	rf, err := formInt(r, "replication", -1, 16)
	if err != nil {
		return "", err
	}
	configs, err := pairs(r, "configs")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Create topic %s with ", name)
	if parts < 0 {
		b.WriteString("the broker's default number of partitions")
	} else {
		fmt.Fprintf(&b, "%d partitions", parts)
	}
	if rf > 0 {
		fmt.Fprintf(&b, ", replication factor %d", rf)
	}
	for _, kv := range configs {
		fmt.Fprintf(&b, ", %s=%s", kv[0], kv[1])
	}
	b.WriteString(".")
	return b.String(), nil
}

func (c *Console) createTopic(ctx context.Context, r *http.Request) (string, string, error) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	parts, _ := formInt(r, "partitions", -1, 32)
	rf, _ := formInt(r, "replication", -1, 16)
	configs, _ := pairs(r, "configs")
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.opts.Timeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, int32(parts), int16(rf)
	for _, kv := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = kv[0], &kv[1]
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return "", "", err
	}
	ts := resp.(*kmsg.CreateTopicsResponse).Topics
	if len(ts) == 0 {
		return "", "", fmt.Errorf("creating %s: the broker did not answer for it", name)
	}
	if err := codeErr(ts[0].ErrorCode, ts[0].ErrorMessage); err != nil {
		return "", "", fmt.Errorf("creating %s: %w", name, err)
	}
	return fmt.Sprintf("Created topic %s with %d partitions.", name, ts[0].NumPartitions), "/topics/" + name, nil
}

func (c *Console) deleteTopic(ctx context.Context, r *http.Request) (string, string, error) {
	name := r.PathValue("topic")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(c.opts.Timeout.Milliseconds())
	req.TopicNames = []string{name}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return "", "", err
	}
	for _, t := range resp.(*kmsg.DeleteTopicsResponse).Topics {
		if err := codeErr(t.ErrorCode, t.ErrorMessage); err != nil {
			return "", "", fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	return fmt.Sprintf("Deleted topic %s.", name), "/topics", nil
}

func (c *Console) planAddPartitions(r *http.Request) (string, error) {
	n, err := formInt(r, "count", 0, 32)
	if err != nil {
		return "", err
	}
	if n <= 0 {
		return "", fmt.Errorf("the new number of partitions is missing: %w", errBadRequest)
	}
	return fmt.Sprintf("Grow topic %s to %d partitions (records with a key may then go to another partition than before).",
		r.PathValue("topic"), n), nil
}

func (c *Console) addPartitions(ctx context.Context, r *http.Request) (string, string, error) {
	name := r.PathValue("topic")
	n, _ := formInt(r, "count", 0, 32)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(c.opts.Timeout.Milliseconds())
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, int32(n)
	req.Topics = append(req.Topics, rt)
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return "", "", err
	}
	for _, t := range resp.(*kmsg.CreatePartitionsResponse).Topics {
		if err := codeErr(t.ErrorCode, t.ErrorMessage); err != nil {
			return "", "", fmt.Errorf("adding partitions to %s: %w", name, err)
		}
	}
	return fmt.Sprintf("Topic %s has %d partitions.", name, n), "", nil
}

func (c *Console) planAlterConfig(r *http.Request) (string, error) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if name == "" {
		return "", fmt.Errorf("which config? %w", errBadRequest)
	}
	if r.PostForm.Get("op") == "delete" {
		return fmt.Sprintf("Return topic %s's config %s to its default.", r.PathValue("topic"), name), nil
	}
	return fmt.Sprintf("Set topic %s's config %s to %q.", r.PathValue("topic"), name, r.PostForm.Get("value")), nil
}

func (c *Console) alterConfig(ctx context.Context, r *http.Request) (string, string, error) {
	topic, name, value := r.PathValue("topic"), strings.TrimSpace(r.PostForm.Get("name")), r.PostForm.Get("value")
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Op, rc.Value = name, kmsg.IncrementalAlterConfigOpSet, &value
	if r.PostForm.Get("op") == "delete" {
		rc.Op, rc.Value = kmsg.IncrementalAlterConfigOpDelete, nil
	}
	res.Configs = append(res.Configs, rc)
	req.Resources = append(req.Resources, res)
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return "", "", err
	}
	for _, rr := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if err := codeErr(rr.ErrorCode, rr.ErrorMessage); err != nil {
			return "", "", fmt.Errorf("changing %s of %s: %w", name, topic, err)
		}
	}
	if rc.Value == nil {
		return fmt.Sprintf("Topic %s's %s is back to its default.", topic, name), "", nil
	}
	return fmt.Sprintf("Topic %s's %s is %q.", topic, name, value), "", nil
}

// --- a test record ---

func (c *Console) planProduce(r *http.Request) (string, error) {
	p, err := formInt(r, "partition", 0, 32)
	if err != nil {
		return "", err
	}
	if _, err := pairs(r, "headers"); err != nil {
		return "", err
	}
	return fmt.Sprintf("Produce a record of %d bytes to %s-%d.", len(r.PostForm.Get("key"))+len(r.PostForm.Get("value")),
		r.PathValue("topic"), p), nil
}

// produce appends one record (acks=all, no producer id) and says its
// offset.
func (c *Console) produce(ctx context.Context, r *http.Request) (string, string, error) {
	topic := r.PathValue("topic")
	p, _ := formInt(r, "partition", 0, 32)
	headers, _ := pairs(r, "headers")
	rec := record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(r.PostForm.Get("value"))}
	if k := r.PostForm.Get("key"); k != "" {
		rec.Key = []byte(k)
	}
	for _, h := range headers {
		rec.Headers = append(rec.Headers, record.Header{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	b := record.NewBuilder(record.None)
	if err := b.Append(rec); err != nil {
		return "", "", fmt.Errorf("%w: %w", err, errBadRequest)
	}
	batch, err := b.Build()
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", err, errBadRequest)
	}
	ids, err := c.topicIDs(ctx, r, topic)
	if err != nil {
		return "", "", err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(c.opts.Timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, ids[topic]
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = int32(p), batch.Bytes()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	leader, err := c.leaderOf(ctx, r, topic, int32(p))
	if err != nil {
		return "", "", err
	}
	resp, err := c.requestTo(ctx, r, leader, req)
	if err != nil {
		return "", "", err
	}
	ts := resp.(*kmsg.ProduceResponse).Topics
	if len(ts) == 0 || len(ts[0].Partitions) == 0 {
		return "", "", fmt.Errorf("producing to %s-%d: the broker did not answer for it", topic, p)
	}
	got := ts[0].Partitions[0]
	if err := codeErr(got.ErrorCode, got.ErrorMessage); err != nil {
		return "", "", fmt.Errorf("producing to %s-%d: %w", topic, p, err)
	}
	return fmt.Sprintf("Produced a record to %s-%d at offset %d.", topic, p, got.BaseOffset),
		fmt.Sprintf("/topics/%s/messages?partition=%d&from=offset&offset=%d", topic, p, got.BaseOffset), nil
}
