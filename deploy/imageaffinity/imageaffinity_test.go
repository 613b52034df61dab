package imageaffinity

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
)

// png is a few bytes standing for an image file: the plugin never decodes pixels.
var png = []byte("\x89PNG\r\n\x1a\nthe bytes of one image file, as a client sends them")

func dataURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

func TestDigest(t *testing.T) {
	sum := sha256.Sum256(png)
	want := hex.EncodeToString(sum[:])
	padded := base64.StdEncoding.EncodeToString(png)
	raw := base64.RawStdEncoding.EncodeToString(png)
	if padded == raw {
		t.Fatal("the test image's base64 needs padding for the unpadded case to mean anything")
	}
	tests := []struct {
		name, url, want, err string
	}{
		{"padded", "data:image/png;base64," + padded, want, ""},
		{"unpadded", "data:image/png;base64," + raw, want, ""},
		{"line breaks", "data:image/png;base64," + padded[:8] + "\r\n" + padded[8:16] + "\n" + padded[16:], want, ""},
		{"case and parameters", "DATA:image/JPG;name=x.jpg;BASE64," + padded, want, ""},
		{"remote URL", "https://example.com/cat.png", "", "not a base64 data: URL"},
		{"not base64", "data:image/png," + padded, "", "not a base64 data: URL"},
		{"no comma", "data:image/png;base64", "", "not a base64 data: URL"},
		{"bad payload", "data:image/png;base64,%%%%", "", "payload"},
		{"empty payload", "data:image/png;base64,", "", "no bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Digest(tc.url)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Digest: err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Digest = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func endpoint(name string, waiting int, kv float64) scheduling.Endpoint {
	m := datalayer.NewMetrics()
	m.WaitingQueueSize = waiting
	m.KVCacheUsagePercent = kv
	return scheduling.NewEndpoint(&datalayer.EndpointMetadata{
		NamespacedName: types.NamespacedName{Namespace: "default", Name: name},
		Address:        "127.0.0.1",
		Port:           "8080",
	}, m, nil)
}

func chatRequest(id, model string, image []byte) *scheduling.LLMRequest {
	content := []scheduling.ContentBlock{{Type: "text", Text: "What is it?"}}
	if image != nil {
		content = append(content, scheduling.ContentBlock{Type: "image_url", ImageURL: scheduling.ImageBlock{Url: dataURL(image)}})
	}
	return &scheduling.LLMRequest{
		RequestId:   id,
		TargetModel: model,
		Body: &scheduling.LLMRequestBody{ChatCompletions: &scheduling.ChatCompletionsRequest{
			Messages: []scheduling.Message{{Role: "user", Content: scheduling.Content{Structured: content}}},
		}},
	}
}

func picked(ep scheduling.Endpoint) *scheduling.SchedulingResult {
	return &scheduling.SchedulingResult{
		PrimaryProfileName: "default",
		ProfileResults:     map[string]*scheduling.ProfileRunResult{"default": {TargetEndpoints: []scheduling.Endpoint{ep}}},
	}
}

// serve runs one request through the scorer as the EPP does (Score, then PreRequest with the
// endpoint picked) and returns the scores by endpoint name.
func serve(t *testing.T, s *Scorer, req *scheduling.LLMRequest, eps []scheduling.Endpoint, pick int) map[string]float64 {
	t.Helper()
	scores := s.Score(context.Background(), scheduling.NewCycleState(), req, eps)
	if len(scores) != len(eps) {
		t.Fatalf("Score returned %d scores for %d endpoints", len(scores), len(eps))
	}
	byName := map[string]float64{}
	for ep, v := range scores {
		byName[ep.GetMetadata().NamespacedName.Name] = v
	}
	if pick >= 0 {
		s.PreRequest(context.Background(), req, picked(eps[pick]))
	}
	return byName
}

func TestScore(t *testing.T) {
	other := []byte("another image file")
	idle := []scheduling.Endpoint{endpoint("a", 0, 0.1), endpoint("b", 0, 0.1), endpoint("c", 0, 0.1)}
	tests := []struct {
		name string
		// first is served by endpoint b of idle; then next is scored against now.
		next *scheduling.LLMRequest
		now  []scheduling.Endpoint
		want map[string]float64
	}{
		{"same image goes back to b", chatRequest("2", "demo", png), idle,
			map[string]float64{"a": 0, "b": 1, "c": 0}},
		{"another image has no preference", chatRequest("2", "demo", other), idle,
			map[string]float64{"a": 0, "b": 0, "c": 0}},
		{"same image for another model has no preference", chatRequest("2", "demo-qwen3", png), idle,
			map[string]float64{"a": 0, "b": 0, "c": 0}},
		{"text-only request", chatRequest("2", "demo", nil), idle,
			map[string]float64{"a": 0, "b": 0, "c": 0}},
		{"b's queue within the slack", chatRequest("2", "demo", png),
			[]scheduling.Endpoint{endpoint("a", 1, 0.1), endpoint("b", 3, 0.1), endpoint("c", 2, 0.1)},
			map[string]float64{"a": 0, "b": 1, "c": 0}},
		{"b's queue past the slack gives way", chatRequest("2", "demo", png),
			[]scheduling.Endpoint{endpoint("a", 0, 0.1), endpoint("b", 3, 0.1), endpoint("c", 5, 0.1)},
			map[string]float64{"a": 0, "b": 0, "c": 0}},
		{"b's KV cache past the threshold gives way", chatRequest("2", "demo", png),
			[]scheduling.Endpoint{endpoint("a", 0, 0.1), endpoint("b", 0, 0.95), endpoint("c", 0, 0.1)},
			map[string]float64{"a": 0, "b": 0, "c": 0}},
		{"b left the pool", chatRequest("2", "demo", png),
			[]scheduling.Endpoint{endpoint("a", 0, 0.1), endpoint("c", 0, 0.1)},
			map[string]float64{"a": 0, "c": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(t.Context(), DefaultParameters)
			if err != nil {
				t.Fatal(err)
			}
			first := serve(t, s, chatRequest("1", "demo", png), idle, 1)
			for n, v := range first {
				if v != 0 {
					t.Fatalf("a first sight of the image scored %s %v, want 0 everywhere", n, v)
				}
			}
			got := serve(t, s, tc.next, tc.now, -1)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("scores %v, want %v", got, tc.want)
			}
		})
	}
}

// An image moved off a busy endpoint stays where it was served last.
func TestPreRequestFollowsThePick(t *testing.T) {
	s, err := New(t.Context(), DefaultParameters)
	if err != nil {
		t.Fatal(err)
	}
	idle := []scheduling.Endpoint{endpoint("a", 0, 0), endpoint("b", 0, 0)}
	serve(t, s, chatRequest("1", "demo", png), idle, 0)
	busyA := []scheduling.Endpoint{endpoint("a", 9, 0), endpoint("b", 0, 0)}
	if got := serve(t, s, chatRequest("2", "demo", png), busyA, 1); got["a"] != 0 || got["b"] != 0 {
		t.Fatalf("busy a: scores %v, want 0 for both", got)
	}
	if got := serve(t, s, chatRequest("3", "demo", png), idle, -1); got["a"] != 0 || got["b"] != 1 {
		t.Fatalf("after b served it: scores %v, want b 1", got)
	}
}

// The memory is bounded: past Capacity keys the least recently used goes.
func TestCapacity(t *testing.T) {
	s, err := New(t.Context(), Parameters{Capacity: 2, QueueSlack: 2, KVCacheThreshold: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	eps := []scheduling.Endpoint{endpoint("a", 0, 0), endpoint("b", 0, 0)}
	for i := range 3 {
		img := fmt.Appendf(nil, "image %d", i)
		serve(t, s, chatRequest(fmt.Sprint(i), "demo", img), eps, 1)
	}
	if s.Remembered() != 2 {
		t.Fatalf("remembered %d keys, want 2", s.Remembered())
	}
	if got := serve(t, s, chatRequest("x", "demo", []byte("image 0")), eps, -1); got["b"] != 0 {
		t.Fatalf("the evicted image 0 scored %v, want no preference", got)
	}
	if got := serve(t, s, chatRequest("y", "demo", []byte("image 2")), eps, -1); got["b"] != 1 {
		t.Fatalf("image 2 scored %v, want b 1", got)
	}
}

// PreRequest without a Score before it (the scorer left out of the profile that ran) still
// records the request's image; its per-request state is dropped either way.
func TestPreRequestWithoutScore(t *testing.T) {
	s, err := New(t.Context(), DefaultParameters)
	if err != nil {
		t.Fatal(err)
	}
	eps := []scheduling.Endpoint{endpoint("a", 0, 0), endpoint("b", 0, 0)}
	s.PreRequest(t.Context(), chatRequest("1", "demo", png), picked(eps[0]))
	if got := serve(t, s, chatRequest("2", "demo", png), eps, 1); got["a"] != 1 {
		t.Fatalf("scores %v, want a 1", got)
	}
	if _, err := s.state.Read("2", stateKey); err == nil {
		t.Fatal("request 2's state is still held after its PreRequest")
	}
}

type handle struct{ plugin.Handle }

func (handle) Context() context.Context { return context.Background() }

func TestFactory(t *testing.T) {
	tests := []struct {
		name, params, err string
		want              Parameters
	}{
		{"defaults", ``, "", DefaultParameters},
		{"some set", `{"capacity": 10, "queueSlack": 0}`, "", Parameters{Capacity: 10, QueueSlack: 0, KVCacheThreshold: 0.9}},
		{"unknown field", `{"capacity": 10, "size": 3}`, `unknown field "size"`, Parameters{}},
		{"zero capacity", `{"capacity": 0}`, "capacity must be at least 1", Parameters{}},
		{"negative slack", `{"queueSlack": -1}`, "queueSlack must not be negative", Parameters{}},
		{"threshold over 1", `{"kvCacheThreshold": 1.5}`, "kvCacheThreshold must be in (0, 1]", Parameters{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Factory("affinity", json.RawMessage(tc.params), handle{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Factory: err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := p.(*Scorer)
			if s.params != tc.want || s.TypedName() != (plugin.TypedName{Type: Type, Name: "affinity"}) {
				t.Fatalf("got %+v %v, want %+v named affinity", s.params, s.TypedName(), tc.want)
			}
		})
	}
}
