package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// A chart is drawn on the server as inline SVG: it needs no JavaScript
// (the live refresh only fetches the page again).

// series is one line of a chart: a value per sample time (NaN: none).
type series struct {
	Name   string
	Values []float64
}

// chart is a line chart of series over the same times.
type chart struct {
	ID     string
	Title  string
	Times  []time.Time
	Series []series
	// Unit shows a value with its unit.
	Unit func(float64) string
}

const (
	chartW, chartH         = 600.0, 150.0
	plotL, plotR           = 8.0, 592.0
	plotTop, plotBottom    = 22.0, 128.0
	chartLegendY, chartAxY = 14.0, 144.0
)

// SVG draws the chart: its lines scaled to the largest value, the first
// and last sample's times under it, and each series' latest value in
// the legend. Every text is escaped.
func (c chart) SVG() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	top := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	if top == 0 {
		top = 1
	}
	top *= 1.1
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %g %g" role="img" aria-label="%s" data-samples="%d">`,
		esc(c.ID), chartW, chartH, esc(c.Title), len(c.Times))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title))
	fmt.Fprintf(&b, `<rect class="plot" x="%g" y="%g" width="%g" height="%g"/>`, plotL, plotTop, plotR-plotL, plotBottom-plotTop)
	fmt.Fprintf(&b, `<text class="scale" x="%g" y="%g">%s</text>`, plotL+2, plotTop+10, esc(c.Unit(top)))
	x := func(i int) float64 {
		if len(c.Times) < 2 {
			return plotR
		}
		span := c.Times[len(c.Times)-1].Sub(c.Times[0]).Seconds()
		return plotL + (plotR-plotL)*c.Times[i].Sub(c.Times[0]).Seconds()/span
	}
	y := func(v float64) float64 { return plotBottom - (plotBottom-plotTop)*v/top }
	legend := plotL
	for k, s := range c.Series {
		var pts [][2]float64
		flush := func() {
			switch len(pts) {
			case 0:
			case 1: // a lone point: a dot
				fmt.Fprintf(&b, `<circle class="s%d" cx="%.1f" cy="%.1f" r="2"/>`, k, pts[0][0], pts[0][1])
			default:
				fmt.Fprintf(&b, `<polyline class="s%d" points="`, k)
				for i, p := range pts {
					if i > 0 {
						b.WriteByte(' ')
					}
					fmt.Fprintf(&b, "%.1f,%.1f", p[0], p[1])
				}
				b.WriteString(`"/>`)
			}
			pts = pts[:0]
		}
		last := math.NaN()
		for i, v := range s.Values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			pts, last = append(pts, [2]float64{x(i), y(v)}), v
		}
		flush()
		now := "–"
		if !math.IsNaN(last) {
			now = c.Unit(last)
		}
		text := fmt.Sprintf("%s %s", s.Name, now)
		fmt.Fprintf(&b, `<text class="legend s%d" x="%g" y="%g" data-series="%s" data-last="%s">%s</text>`,
			k, legend, chartLegendY, esc(s.Name), esc(fmt.Sprint(last)), esc(text))
		legend += 8 + 7*float64(len([]rune(text)))
	}
	if n := len(c.Times); n > 0 {
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g">%s</text>`, plotL, chartAxY, c.Times[0].UTC().Format(time.TimeOnly))
		fmt.Fprintf(&b, `<text class="axis end" x="%g" y="%g">%s UTC</text>`, plotR, chartAxY, c.Times[n-1].UTC().Format(time.TimeOnly))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built above, every text escaped
}

func perSecond(f func(int64) string) func(float64) string {
	return func(v float64) string { return f(int64(math.Round(v))) + "/s" }
}

func seconds(v float64) string {
	return (time.Duration(v * float64(time.Second))).Round(time.Microsecond).String()
}

func count(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
