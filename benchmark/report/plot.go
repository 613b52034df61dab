package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/iris-vlm/iris/benchmark/aiperf"
)

// Point is one request on the latency plot.
type Point struct {
	// AtSec is the request's start, in seconds from the first measured request.
	AtSec float64
	// LatencyMS is the HTTP request latency; TTFTMS the time to first token (NaN when not
	// streamed); TaskMS the server's task time (NaN without spans).
	LatencyMS, TTFTMS, TaskMS float64
}

// PointsFromRecords returns the successful profiling records as plot points, in start order.
func PointsFromRecords(recs []aiperf.Record) []Point {
	var out []Point
	var first int64 = math.MaxInt64
	for _, r := range recs {
		if r.Phase() == aiperf.PhaseProfiling && r.Error == nil {
			first = min(first, r.Metadata.RequestStartNS)
		}
	}
	for _, r := range recs {
		if r.Phase() != aiperf.PhaseProfiling || r.Error != nil {
			continue
		}
		lat, ok := r.Metric("request_latency")
		if !ok {
			continue
		}
		p := Point{AtSec: float64(r.Metadata.RequestStartNS-first) / 1e9, LatencyMS: lat, TTFTMS: math.NaN(), TaskMS: math.NaN()}
		if v, ok := r.Metric("time_to_first_token"); ok {
			p.TTFTMS = v
		}
		if v, ok := r.Metric("iris_task_latency"); ok {
			p.TaskMS = v
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Point) int {
		switch {
		case a.AtSec < b.AtSec:
			return -1
		case a.AtSec > b.AtSec:
			return 1
		}
		return 0
	})
	return out
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH                 = 720.0, 360.0
	marginL, marginR             = 64.0, 150.0
	marginT, marginB             = 36.0, 48.0
	innerW, innerH               = plotW - marginL - marginR, plotH - marginT - marginB
	colLatency, colTTFT, colTask = "#1f77b4", "#ff7f0e", "#2ca02c"
)

// WriteSVG draws request latency (and TTFT and task time when present) against the request's
// start time, with the latency p50 and p95 as dashed lines.
func WriteSVG(w io.Writer, title string, pts []Point) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%g" y="20" font-size="14">%s</text>`+"\n", marginL, escape(title))
	if len(pts) == 0 {
		b.WriteString(`<text x="300" y="180">no successful requests</text></svg>` + "\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	maxT, maxY := 0.0, 0.0
	var lats []float64
	for _, p := range pts {
		maxT = max(maxT, p.AtSec)
		maxY = max(maxY, p.LatencyMS, nz(p.TTFTMS), nz(p.TaskMS))
		lats = append(lats, p.LatencyMS)
	}
	yTop := niceCeil(maxY * 1.05)
	if maxT == 0 {
		maxT = 1
	}
	x := func(t float64) float64 { return marginL + innerW*t/maxT }
	y := func(v float64) float64 { return marginT + innerH*(1-v/yTop) }
	// Axes, grid and ticks.
	fmt.Fprintf(&b, `<g stroke="#ccc">`)
	for i := range 5 {
		v := yTop * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, marginL, y(v), marginL+innerW, y(v))
	}
	b.WriteString("</g>\n")
	for i := range 5 {
		v := yTop * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y(v)+4, trimNum(v))
		tv := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(tv), marginT+innerH+16, trimNum(tv))
	}
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", marginL, marginT+innerH, marginL+innerW, marginT+innerH)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", marginL, marginT, marginL, marginT+innerH)
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">request start (s)</text>`+"\n", marginL+innerW/2, plotH-10)
	fmt.Fprintf(&b, `<text transform="translate(16 %g) rotate(-90)" text-anchor="middle">ms</text>`+"\n", marginT+innerH/2)
	// Percentile lines.
	st, _ := aiperf.Summarize(lats)
	for i, pl := range []struct {
		name string
		v    float64
	}{{"p50", st.P[4]}, {"p95", st.P[7]}} {
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-dasharray="%d 4"/>`+"\n",
			marginL, y(pl.v), marginL+innerW, y(pl.v), colLatency, 6-2*i)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" fill="%s">latency %s %.2f</text>`+"\n", marginL+innerW+6, y(pl.v)+4, colLatency, pl.name, pl.v)
	}
	// Latency as rings, drawn last, so that TTFT and task dots stay visible inside them.
	series := []struct {
		name, color string
		get         func(Point) float64
		mark        func(x, y float64) string
	}{
		{"task (spans)", colTask, func(p Point) float64 { return p.TaskMS }, func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="5" height="5"/>`, x-2.5, y-2.5)
		}},
		{"TTFT", colTTFT, func(p Point) float64 { return p.TTFTMS }, func(x, y float64) string {
			return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="2.5"/>`, x, y)
		}},
		{"HTTP latency", colLatency, func(p Point) float64 { return p.LatencyMS }, func(x, y float64) string {
			return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4.5" fill="none" stroke-width="1.5"/>`, x, y)
		}},
	}
	legend := 0
	for _, s := range series {
		var marks strings.Builder
		for _, p := range pts {
			if v := s.get(p); !math.IsNaN(v) {
				marks.WriteString(s.mark(x(p.AtSec), y(v)))
			}
		}
		if marks.Len() == 0 {
			continue
		}
		fmt.Fprintf(&b, `<g fill="%s" stroke="%s">%s</g>`+"\n", s.color, s.color, marks.String())
		lx, ly := marginL+innerW+16, marginT+60+18*float64(legend)
		fmt.Fprintf(&b, `<g fill="%s" stroke="%s">%s</g><text x="%g" y="%g">%s</text>`+"\n",
			s.color, s.color, s.mark(lx, ly), lx+10, ly+4, s.name)
		legend++
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func nz(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// niceCeil rounds v up to a round number (1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8 times a power of
// ten), each divisible into the plot's four grid steps.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimNum(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
