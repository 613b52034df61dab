package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/benchmark/aiperf"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("golden file: %v (run go test -update once)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got %s\nwant %s", name, got, want)
	}
}

func f(v float64) *float64 { return &v }

// tableRows and tableStages are what testdata/table.md shows.
var (
	tableRows = []Row{
		{Name: "qwen25vl-3b", Parity: "10/10", HTTPP50: f(74.78), HTTPP95: f(81.31), TaskP50: f(71.1), ImagesPS: f(13.218), TokMin: f(2), TokMed: f(3), TokMax: f(4)},
		{Name: "streamed", Parity: "9/10", HTTPP50: f(60.614), HTTPP95: f(180.63), ImagesPS: f(9.4412), TokMin: f(10), TokMed: f(11.5), TokMax: f(13), TTFTP50: f(20.1), TTFTP95: f(30.26), TPOTP50: f(4.5)},
		{Name: "bare"},
	}
	tableStages = []Stage{{Name: "vision", P50: 20, P95: 25.5, Avg: 21, Share: 0.3}}
)

func TestTable(t *testing.T) {
	rows := tableRows
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteStages(&b, tableStages); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.md", b.Bytes())
	b.Reset()
	if err := WriteTable(&b, rows[:1]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "TTFT") {
		t.Error("TTFT column without a streamed row")
	}
}

func TestFromSummary(t *testing.T) {
	dir := filepath.Join("..", "aiperf", "testdata", "aiperf013", "stream")
	s, err := aiperf.ReadSummary(filepath.Join(dir, aiperf.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	r, stages := FromSummary("fixture", s)
	lat, _ := s.Metric("request_latency")
	thr, _ := s.Metric("request_throughput")
	imgs, _ := s.Metric("num_images")
	osl, _ := s.Metric("output_sequence_length")
	if *r.HTTPP50 != *lat.P50 || *r.HTTPP95 != *lat.P95 || *r.ImagesPS != *thr.Avg**imgs.Avg ||
		*r.TokMin != *osl.Min || *r.TokMed != *osl.P50 || *r.TokMax != *osl.Max || r.TaskP50 != nil || !r.Streamed() ||
		r.Requests != 6 || r.Errors != 2 || len(stages) != 0 {
		t.Errorf("row %+v stages %v", r, stages)
	}
	// Iris's own summary carries task and stage metrics.
	s = aiperf.SummaryFileData{}
	for tag, block := range map[string]string{
		"iris_task_latency":   `{"unit":"ms","avg":10,"p50":9,"p95":12,"min":1,"max":20,"count":3,"sum":30}`,
		"iris_stage_decode":   `{"unit":"ms","avg":6,"p50":5,"p95":7,"min":1,"max":9,"count":3,"sum":18}`,
		"iris_stage_vision":   `{"unit":"ms","avg":3,"p50":3,"p95":4,"min":1,"max":9,"count":3,"sum":9}`,
		"iris_stage_decode_x": `{"unit":"ms"}`,
	} {
		s[tag] = []byte(block)
	}
	r, stages = FromSummary("x", s)
	if r.TaskP50 == nil || *r.TaskP50 != 9 || len(stages) != 2 || stages[0].Name != "vision" || stages[1].Share != 0.6 {
		t.Errorf("row %+v stages %+v", r, stages)
	}
}

// TestStageShareOfTaskTime: a stage that ran in some requests only (the tower on the cache's
// misses) is its total over every request's task time, so never more than the whole; without
// counts or sums a share is unknown, not a ratio of means.
func TestStageShareOfTaskTime(t *testing.T) {
	// ten requests: nine misses whose task is the tower's 900 ms and 100 ms more, one hit of
	// 100 ms; the tower's mean (900) is over the task's mean (910 - 810 + ... = 910), its share
	// 8100 / 9100
	s := aiperf.SummaryFileData{
		"iris_task_latency":        []byte(`{"unit":"ms","avg":910,"p50":1000,"p95":1000,"count":10,"sum":9100}`),
		"iris_stage_vision":        []byte(`{"unit":"ms","avg":900,"p50":900,"p95":900,"count":9}`),
		"iris_stage_vision_cached": []byte(`{"unit":"ms","avg":0.5,"p50":0.5,"p95":0.5,"count":1,"sum":0.5}`),
		"iris_stage_decode":        []byte(`{"unit":"ms","avg":100,"p50":100,"p95":100}`),
	}
	_, stages := FromSummary("x", s)
	want := map[string]float64{"vision": 8100.0 / 9100, "vision_cached": 0.5 / 9100}
	for _, st := range stages {
		w, ok := want[st.Name]
		switch {
		case !ok && !math.IsNaN(st.Share):
			t.Errorf("%s: share %v without a count, want unknown", st.Name, st.Share)
		case ok && math.Abs(st.Share-w) > 1e-12:
			t.Errorf("%s: share %v, want %v", st.Name, st.Share, w)
		case st.Share > 1:
			t.Errorf("%s: share %v over the whole task time", st.Name, st.Share)
		}
	}
	var b bytes.Buffer
	if err := WriteStages(&b, stages); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| vision | 900.00 | 900.00 | 900.00 | 89.0% |") || !strings.Contains(b.String(), "| decode | 100.00 | 100.00 | 100.00 | – |") {
		t.Errorf("stages table:\n%s", b.String())
	}
}

// svgPoints are what testdata/latency.svg plots.
var svgPoints = []Point{
	{AtSec: 0, LatencyMS: 70, TTFTMS: 20, TaskMS: 65},
	{AtSec: 0.08, LatencyMS: 75.5, TTFTMS: 22, TaskMS: 71},
	{AtSec: 0.16, LatencyMS: 180, TTFTMS: 90, TaskMS: math.NaN()},
}

func TestSVG(t *testing.T) {
	pts := svgPoints
	var b bytes.Buffer
	if err := WriteSVG(&b, "Request latency: a<b", pts); err != nil {
		t.Fatal(err)
	}
	golden(t, "latency.svg", b.Bytes())
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Errorf("not well-formed XML: %v", err)
	}
	b.Reset()
	if err := WriteSVG(&b, "empty", nil); err != nil || !strings.Contains(b.String(), "no successful requests") {
		t.Errorf("empty plot: %v %s", err, b.String())
	}
}

func TestPointsFromRecords(t *testing.T) {
	recs, err := aiperf.ReadRecords(filepath.Join("..", "aiperf", "testdata", "aiperf013", "stream", aiperf.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	pts := PointsFromRecords(recs)
	if len(pts) != 6 || pts[0].AtSec != 0 || math.IsNaN(pts[0].TTFTMS) || !math.IsNaN(pts[0].TaskMS) {
		t.Fatalf("points %+v", pts)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].AtSec < pts[i-1].AtSec {
			t.Error("points out of order")
		}
	}
}

// cellNear reports whether a table cell shows want: "–" for none, else the numbers of want
// joined by "/", each within half a unit of the last decimal the cell shows.
func cellNear(cell string, want ...*float64) bool {
	if want[0] == nil {
		return cell == "–"
	}
	parts := strings.Split(strings.TrimSuffix(cell, "%"), "/")
	if len(parts) != len(want) {
		return false
	}
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || want[i] == nil {
			return false
		}
		decimals := 0
		if dot := strings.IndexByte(p, '.'); dot >= 0 {
			decimals = len(p) - dot - 1
		}
		if math.Abs(v-*want[i]) > 0.5*math.Pow(10, -float64(decimals))+1e-9 {
			return false
		}
	}
	return true
}

// TestTableGoldenShowsTheRows reads testdata/table.md as a Markdown table and checks each cell
// against the row it was written from: the value, rounded to the decimals shown, or "–" when the
// row has none; the TTFT and TPOT columns present, as a streamed row is.
func TestTableGoldenShowsTheRows(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	var tables [][][]string // tables of rows of cells, the header first
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case strings.HasPrefix(line, "|---"):
		case len(tables) > 0 && len(tables[len(tables)-1]) > 0 && len(cells) == len(tables[len(tables)-1][0]):
			tables[len(tables)-1] = append(tables[len(tables)-1], cells)
		default:
			tables = append(tables, [][]string{cells})
		}
	}
	if len(tables) != 2 || len(tables[0]) != len(tableRows)+1 || len(tables[1]) != len(tableStages)+1 {
		t.Fatalf("%d tables in table.md, want the rows' (%d rows) and the stages' (%d)", len(tables), len(tableRows), len(tableStages))
	}
	col := map[string]int{}
	for i, h := range tables[0][0] {
		col[h] = i
	}
	for i, r := range tableRows {
		cells := tables[0][i+1]
		parity := r.Parity
		if parity == "" {
			parity = "–"
		}
		for name, ok := range map[string]bool{
			"profile":                      cells[col["profile"]] == r.Name,
			"parity":                       cells[col["parity"]] == parity,
			"HTTP p50/p95 ms":              cellNear(cells[col["HTTP p50/p95 ms"]], r.HTTPP50, r.HTTPP95),
			"task p50 ms":                  cellNear(cells[col["task p50 ms"]], r.TaskP50),
			"images/s":                     cellNear(cells[col["images/s"]], r.ImagesPS),
			"output tokens min/median/max": cellNear(cells[col["output tokens min/median/max"]], r.TokMin, r.TokMed, r.TokMax),
			"TTFT p50/p95 ms":              cellNear(cells[col["TTFT p50/p95 ms"]], r.TTFTP50, r.TTFTP95),
			"TPOT p50 ms":                  cellNear(cells[col["TPOT p50 ms"]], r.TPOTP50),
		} {
			if _, has := col[name]; !has || !ok {
				t.Errorf("row %s, column %q: %v (column present %v)", r.Name, name, cells, has)
			}
		}
	}
	for i, st := range tableStages {
		cells := tables[1][i+1]
		share := st.Share * 100
		if cells[0] != st.Name || !cellNear(cells[1], &st.P50) || !cellNear(cells[2], &st.P95) || !cellNear(cells[3], &st.Avg) ||
			!strings.HasSuffix(cells[4], "%") || !cellNear(cells[4], &share) {
			t.Errorf("stage %s: %v", st.Name, cells)
		}
	}
}

// svgNode is any element of an SVG document.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []svgNode  `xml:",any"`
}

func (n *svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *svgNode) num(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(name), 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", n.XMLName.Local, name, n.attr(name), err)
	}
	return v
}

// walk calls visit on n and every element below it, with the fill of the group it is in.
func (n *svgNode) walk(fill string, visit func(n *svgNode, fill string)) {
	if f := n.attr("fill"); n.XMLName.Local == "g" && f != "" {
		fill = f
	}
	visit(n, fill)
	for i := range n.Nodes {
		n.Nodes[i].walk(fill, visit)
	}
}

// TestSVGGoldenPlotsThePoints reads testdata/latency.svg as XML and checks it against the points
// it was drawn from, through the axes it labels: the y axis's tick labels (0 to 200 ms) and the
// x axis's (0 to 0.16 s) give the scale; every point's HTTP latency circle, TTFT dot and task
// square sit where the scale puts its values (one decimal, as written), a NaN draws nothing, and
// the p50 and p95 lines are numpy's percentiles of the latencies.
func TestSVGGoldenPlotsThePoints(t *testing.T) {
	pts := svgPoints
	b, err := os.ReadFile(filepath.Join("testdata", "latency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	var root svgNode
	if err := xml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	// the ticks: y labels are end-anchored beside the grid, x labels centred under the axis
	type tick struct{ value, at float64 }
	var yTicks, xTicks []tick
	var circles, rects []*svgNode
	var circleFills, rectFills []string
	var lineLabels []string
	root.walk("", func(n *svgNode, fill string) {
		switch n.XMLName.Local {
		case "text":
			v, err := strconv.ParseFloat(n.Text, 64)
			switch {
			case err == nil && n.attr("text-anchor") == "end":
				yTicks = append(yTicks, tick{v, n.num(t, "y") - 4}) // the label's baseline is 4 below its grid line
			case err == nil && n.attr("text-anchor") == "middle":
				xTicks = append(xTicks, tick{v, n.num(t, "x")})
			case strings.HasPrefix(n.Text, "latency p"):
				lineLabels = append(lineLabels, n.Text)
			}
		case "circle":
			circles, circleFills = append(circles, n), append(circleFills, fill)
		case "rect":
			if n.attr("width") == "5" {
				rects, rectFills = append(rects, n), append(rectFills, fill)
			}
		}
	})
	if len(yTicks) < 2 || len(xTicks) < 2 {
		t.Fatalf("ticks: y %v, x %v", yTicks, xTicks)
	}
	scale := func(ticks []tick, v float64) float64 {
		a, z := ticks[0], ticks[len(ticks)-1]
		return a.at + (v-a.value)*(z.at-a.at)/(z.value-a.value)
	}
	legendX := 580.0 // the legend's marks are right of the plot
	var latency, ttft, task [][2]float64
	for i, c := range circles {
		if c.num(t, "cx") > legendX {
			continue
		}
		xy := [2]float64{c.num(t, "cx"), c.num(t, "cy")}
		switch {
		case circleFills[i] == "#1f77b4" && c.attr("r") == "4.5":
			latency = append(latency, xy)
		case circleFills[i] == "#ff7f0e":
			ttft = append(ttft, xy)
		}
	}
	for i, r := range rects {
		if r.num(t, "x") > legendX || rectFills[i] != "#2ca02c" {
			continue
		}
		task = append(task, [2]float64{r.num(t, "x") + 2.5, r.num(t, "y") + 2.5}) // a square's centre
	}
	check := func(what string, got [][2]float64, value func(Point) float64) {
		t.Helper()
		var want [][2]float64
		for _, p := range pts {
			if v := value(p); !math.IsNaN(v) {
				want = append(want, [2]float64{scale(xTicks, p.AtSec), scale(yTicks, v)})
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d marks, want %d: %v", what, len(got), len(want), got)
		}
		for i := range want {
			if math.Abs(got[i][0]-want[i][0]) > 0.05+1e-9 || math.Abs(got[i][1]-want[i][1]) > 0.05+1e-9 {
				t.Errorf("%s mark %d at %v, the axes put its point at %v", what, i, got[i], want[i])
			}
		}
	}
	check("HTTP latency", latency, func(p Point) float64 { return p.LatencyMS })
	check("TTFT", ttft, func(p Point) float64 { return p.TTFTMS })
	check("task", task, func(p Point) float64 { return p.TaskMS })
	lat := []float64{}
	for _, p := range pts {
		lat = append(lat, p.LatencyMS)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 {
		r := q / 100 * float64(len(lat)-1)
		lo, hi := int(math.Floor(r)), int(math.Ceil(r))
		return lat[lo] + (lat[hi]-lat[lo])*(r-float64(lo))
	}
	want := []string{fmt.Sprintf("latency p50 %.2f", pct(50)), fmt.Sprintf("latency p95 %.2f", pct(95))}
	if !slices.Equal(lineLabels, want) {
		t.Errorf("percentile lines %q, want %q", lineLabels, want)
	}
}
