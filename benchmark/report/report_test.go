package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
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

func TestTable(t *testing.T) {
	rows := []Row{
		{Name: "qwen25vl-3b", Parity: "10/10", HTTPP50: f(74.78), HTTPP95: f(81.31), TaskP50: f(71.1), ImagesPS: f(13.218), TokMin: f(2), TokMed: f(3), TokMax: f(4)},
		{Name: "streamed", Parity: "9/10", HTTPP50: f(60.614), HTTPP95: f(180.63), ImagesPS: f(9.4412), TokMin: f(10), TokMed: f(11.5), TokMax: f(13), TTFTP50: f(20.1), TTFTP95: f(30.26), TPOTP50: f(4.5)},
		{Name: "bare"},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteStages(&b, []Stage{{Name: "vision", P50: 20, P95: 25.5, Avg: 21, Share: 0.3}}); err != nil {
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

func TestSVG(t *testing.T) {
	pts := []Point{
		{AtSec: 0, LatencyMS: 70, TTFTMS: 20, TaskMS: 65},
		{AtSec: 0.08, LatencyMS: 75.5, TTFTMS: 22, TaskMS: 71},
		{AtSec: 0.16, LatencyMS: 180, TTFTMS: 90, TaskMS: math.NaN()},
	}
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
