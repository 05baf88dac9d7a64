// Package ratelog bounds what a log can be made to write: a slog.Handler
// that lets through at most Burst lines a second of each message (its level
// and text, whatever its attributes), and adds to the next line of a
// message let through how many like it were dropped. A client that opens
// twenty thousand bad connections a second gets a few lines and a count,
// not twenty thousand lines.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DroppedKey is the attribute that counts the lines of the same message
// dropped since the last one written.
const DroppedKey = "dropped"

// maxMessages bounds the messages tracked; messages past it share one
// budget (a message is a constant in the code, so this is never reached
// but by a bug that puts a variable in one).
const maxMessages = 1024

// Options configure a Handler.
type Options struct {
	// Burst is the lines of one message written a second. The default
	// is 10.
	Burst int
	// Clock is the time the budget renews by. The default is time.Now.
	Clock func() time.Time
}

// New returns a Handler that writes to h at most Burst lines of each
// message a second. Handlers derived from it (WithAttrs, WithGroup) share
// its budget.
func New(h slog.Handler, opts Options) slog.Handler {
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if r, ok := h.(*handler); ok { // already limited
		return r
	}
	return &handler{next: h, st: &state{opts: opts, by: map[key]*budget{}}}
}

type key struct {
	level slog.Level
	msg   string
}

// budget is one message's: the second it counts in, the lines written in
// it, and those dropped since the last written.
type budget struct {
	second  time.Time
	n       int
	dropped int
}

type state struct {
	opts  Options
	mu    sync.Mutex // guards by and other
	by    map[key]*budget
	other budget
}

// admit reports whether a line may be written now, and how many of its
// message were dropped before it.
func (s *state) admit(k key) (int, bool) {
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.by[k]
	if b == nil {
		if len(s.by) < maxMessages {
			b = &budget{}
			s.by[k] = b
		} else {
			b = &s.other
		}
	}
	if now.Sub(b.second) >= time.Second || now.Before(b.second) {
		b.second, b.n = now, 0
	}
	if b.n >= s.opts.Burst {
		b.dropped++
		return 0, false
	}
	b.n++
	dropped := b.dropped
	b.dropped = 0
	return dropped, true
}

type handler struct {
	next slog.Handler
	st   *state
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	dropped, ok := h.st.admit(key{r.Level, r.Message})
	if !ok {
		return nil
	}
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(DroppedKey, dropped))
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(as), st: h.st}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), st: h.st}
}
