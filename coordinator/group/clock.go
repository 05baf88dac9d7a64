package group

import "time"

// clock is time for the coordinator: the real one, or a test's, whose
// timers fire when the test moves it.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) stopper
}

type stopper interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

// after runs f after d unless the coordinator has closed by then.
func (c *Coordinator) after(d time.Duration, f func()) stopper {
	return c.opts.clock.AfterFunc(d, func() {
		if !c.shut.Load() {
			f()
		}
	})
}
