package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/servertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// TestRealServer runs the command against the real gateway on the tiny engine, in this
// process (so -pid is this test's): every check passes, /metrics is read.
func TestRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	const model = "tiny-untied"
	ts := servertest.Start(t, coretest.Bundle(t, model, 1024))
	dir := t.TempDir()
	for _, c := range coretest.Cases(t, model) {
		if err := os.WriteFile(filepath.Join(dir, c.Name+".png"), c.Image, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "soak.json")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-url", ts.URL, "-model", model, "-images", dir, "-requests", "60", "-concurrency", "8",
		"-pid", "0", "-json", out}, &stdout, &stderr)
	t.Log(stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"kv at the end: 0 blocks in use", "iris_engine_seconds_total by phase", "decode", "every check passed"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	var rep report
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.KV == nil || *rep.KV != 0 || rep.Result.Requests != 60 || rep.Result.Latency.N == 0 {
		t.Errorf("JSON result %s", raw)
	}
}

// TestUsage: each refusal of the command line exits 2 naming what is wrong; every case but the
// one broken flag is a valid command line (an image to send, a closed port that would answer
// nothing), so that a missing check shows as another message.
func TestUsage(t *testing.T) {
	empty, images := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(images, "a.png"), []byte("not read before the run"), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := []string{"-url", "http://127.0.0.1:1", "-timeout", "1s", "-requests", "1", "-model", "m", "-images", images}
	with := func(args ...string) []string { return append(slices.Clone(valid), args...) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", with("-model", ""), "-model and -images are required"},
		{"no images", with("-images", empty), "no .jpg, .jpeg or .png files in " + empty},
		{"bad fractions", with("-bad", "0.6", "-cancel", "0.6"), "-bad 0.6 and -cancel 0.6: want each >= 0, summing to at most 1"},
		{"negative fraction", with("-bad", "-0.1"), "-bad -0.1 and -cancel 0.1"},
		{"no requests", with("-requests", "0"), "-requests, -concurrency and -max-tokens must be positive"},
		{"extra argument", with("x"), `unexpected arguments ["x"]`},
		{"unknown flag", with("-nope"), "flag provided but not defined: -nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d: %s\nwant exit 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP iris_kv_cache_utilization x
# TYPE iris_kv_cache_utilization gauge
iris_kv_cache_utilization{model="a"} 0.25
iris_kv_cache_utilization{model="b"} 0
iris_engine_seconds_total{model="a",phase="decode"} 1.5
iris_engine_seconds_total{model="b",phase="decode"} 0.5
iris_engine_seconds_total{phase="vision"} 2
go_goroutines 12
`
	s := parseMetrics(text)
	for _, tc := range []struct {
		model string
		want  float64
	}{{"a", 0.25}, {"b", 0}} {
		if kv := kvUtilization(s, tc.model); kv == nil || *kv != tc.want {
			t.Errorf("kv of %s: %v, want %g", tc.model, kv, tc.want)
		}
	}
	if kv := kvUtilization(s, "c"); kv != nil {
		t.Errorf("kv of an unknown model: %g, want none", *kv)
	}
	if got := engineSeconds(s); got["decode"] != 2 || got["vision"] != 2 || len(got) != 2 {
		t.Errorf("engine seconds %v", got)
	}
}
