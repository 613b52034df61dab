package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no model", []string{"-images", dir}},
		{"no images", []string{"-model", "m", "-images", dir}},
		{"bad fractions", []string{"-model", "m", "-images", dir, "-bad", "0.6", "-cancel", "0.6"}},
		{"unknown flag", []string{"-nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr.String())
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
