package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// OpType is what an operation record says: an operation began (invoke),
// or ended — ok (it happened), fail (it certainly did not), info (its
// outcome is unknown).
type OpType string

const (
	Invoke OpType = "invoke"
	OK     OpType = "ok"
	Fail   OpType = "fail"
	Info   OpType = "info"
)

// Op is one entry of the history.
type Op struct {
	// Index is the op's place in the history; Time its nanoseconds since
	// the run began.
	Index int   `json:"index"`
	Time  int64 `json:"time"`
	// Process is the client that ran it (producer or consumer n), or
	// "nemesis".
	Process string `json:"process"`
	Type    OpType `json:"type"`
	// F is the function: "send", "poll" (a consumer's poll), "final" (the
	// last read of everything); of the transactional workload "txn",
	// "end", "offsets" (a read of its group's committed offsets) and
	// "txn-final"; or the nemesis's fault ("power-cut", …).
	F string `json:"f"`
	// Value is what was sent (send, txn) or read (poll, final), or a
	// group's committed offsets (offsets: a record per partition, no
	// value).
	Value []Record `json:"value,omitempty"`
	// Txn names a transaction (txn, and the commit or abort it ends with:
	// F "end", invoked just before EndTxn); Reads are the records its
	// consumer read before it began, whose offsets it commits.
	Txn   string   `json:"txn,omitempty"`
	Reads []Record `json:"reads,omitempty"`
	// Error is a failed or unknown op's error; Note a nemesis op's words.
	Error string `json:"error,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Record is a record sent or read: its partition, offset (-1 for a send
// not yet answered) and value.
type Record struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

// History records ops in the order they happen, to memory and (if set)
// to a file, one JSON object a line.
type History struct {
	start time.Time
	mu    sync.Mutex // guards ops, w and f
	ops   []Op
	w     *bufio.Writer
	f     io.Closer
}

// NewHistory starts a history, written to path if it is not empty.
func NewHistory(path string) (*History, error) {
	h := &History{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		h.w, h.f = bufio.NewWriter(f), f
	}
	return h, nil
}

// Add appends op (its index and time set here) and returns it.
func (h *History) Add(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index, op.Time = len(h.ops), time.Since(h.start).Nanoseconds()
	h.ops = append(h.ops, op)
	if h.w != nil {
		b, _ := json.Marshal(op)
		_, _ = h.w.Write(append(b, '\n'))
	}
	return op
}

// Ops returns the ops so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Close flushes and closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return nil
	}
	err := h.w.Flush()
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.w = nil
	return err
}

// ReadHistory reads a history file back (to check it again).
func ReadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("jepsen: %s line %d: %w", path, len(ops)+1, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}
