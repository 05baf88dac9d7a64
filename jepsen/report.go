package jepsen

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Window is a fault's time in a history: from its first nemesis op to the
// last heal before the next fault.
type Window struct {
	Fault      string
	Start, End time.Duration
	// Stall is the longest time, from the fault's start until the next
	// fault, without an acknowledged send: how long produce stopped.
	Stall time.Duration
}

// Windows finds the faults' windows in a history and each one's stall.
func Windows(ops []Op) []Window {
	var out []Window
	healed := false
	for _, op := range ops {
		if op.Process != "nemesis" {
			continue
		}
		at := time.Duration(op.Time)
		switch {
		case op.F == "heal" && len(out) > 0:
			out[len(out)-1].End, healed = at, true
		case op.F != "heal" && (len(out) == 0 || healed):
			out = append(out, Window{Fault: op.F, Start: at, End: at})
			healed = false
		}
	}
	acks := ackTimes(ops)
	for i := range out {
		until := time.Duration(math.MaxInt64)
		if i+1 < len(out) {
			until = out[i+1].Start
		}
		last := out[i].Start
		j := sort.Search(len(acks), func(k int) bool { return acks[k] >= last })
		for ; j < len(acks) && acks[j] < until; j++ {
			out[i].Stall = max(out[i].Stall, acks[j]-last)
			last = acks[j]
		}
	}
	return out
}

// ackTimes are the times of the acknowledged sends, in order.
func ackTimes(ops []Op) []time.Duration {
	var out []time.Duration
	for _, op := range ops {
		if op.F == "send" && op.Type == OK {
			out = append(out, time.Duration(op.Time))
		}
	}
	return out
}

// Plot draws the run as Jepsen's reports do, to a PNG at path: above,
// each acknowledged send's latency over time; below, acknowledged sends
// a second; the faults' windows shaded in both.
func Plot(ops []Op, path string) error {
	invoked := map[string]time.Duration{}
	var lat plotter.XYs
	rate := map[int]int{}
	last := 0
	for _, op := range ops {
		if op.F != "send" {
			continue
		}
		at := time.Duration(op.Time)
		switch op.Type {
		case Invoke:
			invoked[op.Process] = at
		case OK:
			if from, ok := invoked[op.Process]; ok {
				lat = append(lat, plotter.XY{X: at.Seconds(), Y: math.Max((at-from).Seconds()*1000, 0.01)})
			}
			s := int(at / time.Second)
			rate[s]++
			last = max(last, s)
		}
	}
	var thr plotter.XYs
	for s := 0; s <= last; s++ {
		thr = append(thr, plotter.XY{X: float64(s) + 0.5, Y: float64(rate[s])})
	}
	windows := Windows(ops)

	top := plot.New()
	top.Title.Text = "acknowledged sends: latency (ms)"
	top.Y.Scale, top.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	top.X.Label.Text = "time (s)"
	bottom := plot.New()
	bottom.Title.Text = "acknowledged sends a second"
	bottom.X.Label.Text = "time (s)"
	maxRate := 1.0
	for _, p := range thr {
		maxRate = max(maxRate, p.Y)
	}
	for _, w := range windows {
		for _, pl := range []struct {
			p      *plot.Plot
			lo, hi float64
		}{{top, 0.01, 1e5}, {bottom, 0, maxRate}} {
			end := max(w.End, w.Start+200*time.Millisecond)
			poly, err := plotter.NewPolygon(plotter.XYs{{X: w.Start.Seconds(), Y: pl.lo}, {X: end.Seconds(), Y: pl.lo},
				{X: end.Seconds(), Y: pl.hi}, {X: w.Start.Seconds(), Y: pl.hi}})
			if err != nil {
				return err
			}
			poly.Color = color.NRGBA{R: 255, G: 140, B: 0, A: 70}
			poly.LineStyle.Width, poly.LineStyle.Color = 0, color.Transparent
			pl.p.Add(poly)
		}
	}
	if len(lat) > 0 {
		sc, err := plotter.NewScatter(lat)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Radius = vg.Points(0.6)
		sc.GlyphStyle.Color = color.RGBA{B: 180, A: 255}
		top.Add(sc)
	}
	if len(thr) > 0 {
		line, err := plotter.NewLine(thr)
		if err != nil {
			return err
		}
		line.Color = color.RGBA{G: 120, A: 255}
		bottom.Add(line)
	}
	bottom.Y.Min, bottom.Y.Max = 0, maxRate*1.05
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, float64(last+1)
	}
	img := vgimg.New(10*vg.Inch, 7*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(w); err != nil {
		w.Close()
		return fmt.Errorf("jepsen: writing %s: %w", path, err)
	}
	return w.Close()
}
