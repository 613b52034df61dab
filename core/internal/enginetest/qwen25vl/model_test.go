package qwen25vl_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/qwen25vl"
)

// Load binds the checkpoint in dir on a CPU backend with opts, within lim (nil: the defaults).
func Load(dir string, opts cpu.Options, lim *model.Limits) (*qwen25vl.Model, error) {
	b, err := cpu.New(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	l := model.DefaultLimits(cfg)
	if lim != nil {
		l = *lim
	}
	return qwen25vl.New(b, ck, cfg, l, qwen25vl.Options{})
}

func calls(m *qwen25vl.Model) int64 { return m.Backend().(*cpu.Backend).Calls }

// TestRefusesBeforeKernels: requests over the context or the image bounds are refused before
// any kernel runs, and the next valid request is answered exactly.
func TestRefusesBeforeKernels(t *testing.T) {
	lim := model.Limits{ContextLength: 300, MaxImages: 1, MaxImagePatches: 1000, MaxGridSide: 40}
	m, err := Load(fixture.ModelDir("tiny-untied"), cpu.Options{}, &lim)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rect, rectImg := fixture.MustCase(t, "rect_320x240")    // 126 prompt tokens, 396 patches
	large, largeImg := fixture.MustCase(t, "large_644x476") // 1564 patches

	tests := []struct {
		name string
		req  engine.Request
		is   error
	}{
		{"context", engine.Request{IDs: rect.InputIDs, Images: []model.Image{rectImg}, MaxNewTokens: 300 - len(rect.InputIDs) + 1}, model.ErrContextExceeded},
		{"grid", engine.Request{IDs: large.InputIDs, Images: []model.Image{largeImg}, MaxNewTokens: 1}, model.ErrImageTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The runtime's own pre-check, then Generate's.
			if err := engine.Check(m.Config(), m.Limits(), &tt.req); !errors.Is(err, tt.is) {
				t.Fatalf("Check: %v, want %v", err, tt.is)
			}
			before := calls(m)
			_, err := engine.Generate(ctx, m, tt.req)
			var be *model.BoundsError
			if !errors.Is(err, tt.is) || !errors.As(err, &be) {
				t.Fatalf("Generate: %v, want a BoundsError for %v", err, tt.is)
			}
			if n := calls(m) - before; n != 0 {
				t.Errorf("%d kernel calls for a refused request", n)
			}
		})
	}

	res, err := engine.Generate(ctx, m, engine.Request{IDs: rect.InputIDs, Images: []model.Image{rectImg}, MaxNewTokens: 24, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range golden.Cases {
		if g.Case == rect.Name && !slices.Equal(res.Tokens, g.Tokens) {
			t.Errorf("after refusals: tokens %v, want %v", res.Tokens, g.Tokens)
		}
	}

	// The model guards its sequences' capacity too.
	seq, err := m.NewSequence(10)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	pos, err := model.PromptPositions(m.Config(), rect.InputIDs, []model.Grid{rect.Grid()})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := m.EncodeVision(ctx, rectImg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Prefill(ctx, seq, model.Prompt{IDs: rect.InputIDs, Positions: pos, Images: []*model.Embeddings{emb}})
	var be *model.BoundsError
	if !errors.Is(err, model.ErrContextExceeded) || !errors.As(err, &be) {
		t.Errorf("prefill over capacity: %v, want a BoundsError wrapping ErrContextExceeded", err)
	}
	if _, err := m.NewSequence(301); !errors.Is(err, model.ErrContextExceeded) {
		t.Errorf("sequence over the context: %v", err)
	}
}

// TestParityDetectsWrongGraph shows the parity checks can fail: the same weights with the
// rotary sections permuted must miss the golden logits.
func TestParityDetectsWrongGraph(t *testing.T) {
	cfg, err := model.LoadConfig(fixture.ModelDir("tiny-untied"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Text.MRopeSection = [3]int{3, 2, 3}
	ck, err := ml.OpenCheckpoint(fixture.ModelDir("tiny-untied"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := qwen25vl.New(b, ck, cfg, model.DefaultLimits(cfg), qwen25vl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	g := golden.Cases[1]
	logits := firstLogits(t, m, g.Case)
	got := make([]float32, len(g.LogitIDs))
	for i, id := range g.LogitIDs {
		got[i] = logits[id]
	}
	if d := maxDiff(got, g.LogitValues); d <= logitTol {
		t.Errorf("permuted mrope sections still match the golden logits (max |diff| %.3g)", d)
	}
}

func firstLogits(t *testing.T, m *qwen25vl.Model, name string) []float32 {
	t.Helper()
	ctx := context.Background()
	c, img := fixture.MustCase(t, name)
	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := model.PromptPositions(m.Config(), c.InputIDs, []model.Grid{c.Grid()})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := m.NewSequence(len(c.InputIDs))
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	logits, err := m.Prefill(ctx, seq, model.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*model.Embeddings{emb}})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(logits)
}

func TestClose(t *testing.T) {
	m, err := Load(fixture.ModelDir("tiny-tied"), cpu.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := m.NewSequence(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.DecodeStep(ctx, seq, 1, 0); !errors.Is(err, ml.ErrClosed) {
		t.Errorf("decode after close: %v", err)
	}
	if _, err := m.NewSequence(8); !errors.Is(err, ml.ErrClosed) {
		t.Errorf("new sequence after close: %v", err)
	}
	img := model.Image{Pixels: make([]float32, 4*1176), Grid: model.Grid{T: 1, H: 2, W: 2}}
	if _, err := m.EncodeVision(ctx, img); !errors.Is(err, ml.ErrClosed) {
		t.Errorf("vision after close: %v", err)
	}
	if err := seq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := seq.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentRequests runs requests from several goroutines on one model; each must get
// exactly its golden answer.
func TestConcurrentRequests(t *testing.T) {
	m := loadFixture(t, "tiny-untied", cpu.Options{})
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, g := range golden.Cases[:4] {
		c, img := fixture.MustCase(t, g.Case)
		wg.Go(func() {
			res, err := engine.Generate(context.Background(), m, engine.Request{
				IDs: c.InputIDs, Images: []model.Image{img}, MaxNewTokens: len(g.Tokens), IgnoreEOS: true,
			})
			if err != nil {
				t.Error(err)
				return
			}
			if !slices.Equal(res.Tokens, g.Tokens) {
				t.Errorf("%s: tokens %v, want %v", g.Case, res.Tokens, g.Tokens)
			}
		})
	}
	wg.Wait()
}

// TestStopToken: generation stops at a stop id and leaves it out of the answer.
func TestStopToken(t *testing.T) {
	m := loadFixture(t, "tiny-untied", cpu.Options{})
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	g := golden.Cases[0]
	c, img := fixture.MustCase(t, g.Case)
	stop := g.Tokens[5]
	first := slices.Index(g.Tokens, stop)
	var streamed []int32
	res, err := engine.Generate(context.Background(), m, engine.Request{
		IDs: c.InputIDs, Images: []model.Image{img}, MaxNewTokens: 24, StopIDs: []int32{stop},
		OnToken: func(id int32) error { streamed = append(streamed, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish != engine.FinishStop || res.StopToken != stop || !slices.Equal(res.Tokens, g.Tokens[:first]) || !slices.Equal(streamed, res.Tokens) {
		t.Errorf("finish %q stop %d tokens %v streamed %v; want stop %d after %v", res.Finish, res.StopToken, res.Tokens, streamed, stop, g.Tokens[:first])
	}
	if res.Timings.Vision <= 0 || res.Timings.Prefill <= 0 || res.Timings.Decode <= 0 {
		t.Errorf("timings %+v: every stage ran", res.Timings)
	}
}

// ----------------------------------------------------------------------------
// weight files: shards, dtypes and broken files

type stTensor struct {
	name  string
	dtype string
	shape []int64
	data  []byte
}

func readST(t *testing.T, path string) []stTensor {
	t.Helper()
	es, err := ml.ReadSafetensorsHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []stTensor
	for _, e := range es {
		out = append(out, stTensor{e.Name, e.Dtype, e.Shape, raw[e.Offset : e.Offset+e.Size]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func writeST(t *testing.T, path string, ts []stTensor) {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, x := range ts {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(x.data)}}
		data = append(data, x.data...)
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// convert re-encodes BF16 tensors as F32 (exact) or F16 (rounded to nearest even).
func convert(ts []stTensor, dtype string) []stTensor {
	out := make([]stTensor, len(ts))
	for i, x := range ts {
		n := len(x.data) / 2
		var data []byte
		for k := range n {
			f := math.Float32frombits(uint32(binary.LittleEndian.Uint16(x.data[2*k:])) << 16)
			if dtype == "F32" {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
			} else {
				data = binary.LittleEndian.AppendUint16(data, f32toF16(f))
			}
		}
		out[i] = stTensor{x.name, dtype, x.shape, data}
	}
	return out
}

func f32toF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		half := uint32(1) << (shift - 1)
		r := man >> shift
		if rem := man & (1<<shift - 1); rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | man>>13
	if rem := man & 0x1fff; rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// modelDir writes config.json (edited by edit, if set) and the given weight files.
func modelDir(t *testing.T, from string, edit func(string) string, files map[string][]stTensor) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(fixture.ModelDir(from), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		cfg = []byte(edit(string(cfg)))
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, ts := range files {
		writeST(t, filepath.Join(dir, name), ts)
	}
	return dir
}

func TestWeightLayouts(t *testing.T) {
	orig := readST(t, filepath.Join(fixture.ModelDir("tiny-untied"), "model.safetensors"))
	ref := firstLogits(t, loadFixture(t, "tiny-untied", cpu.Options{}), "square_56")

	var a, b []stTensor
	index := map[string]map[string]string{"weight_map": {}}
	for i, x := range orig {
		shard := "model-00001-of-00002.safetensors"
		if i%2 == 1 {
			shard = "model-00002-of-00002.safetensors"
			b = append(b, x)
		} else {
			a = append(a, x)
		}
		index["weight_map"][x.name] = shard
	}
	sharded := modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model-00001-of-00002.safetensors": a, "model-00002-of-00002.safetensors": b})
	idx, err := json.Marshal(index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sharded, "model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	// A tensor named only in the hub's other spelling (transformers 5 module paths).
	renamed := slices.Clone(orig)
	for i := range renamed {
		if n, ok := strings.CutPrefix(renamed[i].name, "model."); ok {
			renamed[i].name = "model.language_model." + n
		} else if n, ok := strings.CutPrefix(renamed[i].name, "visual."); ok {
			renamed[i].name = "model.visual." + n
		}
	}

	tests := []struct {
		name string
		dir  string
		tol  float64
	}{
		{"two shards", sharded, 0},
		{"f32", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": convert(orig, "F32")}), 0},
		{"module paths", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": renamed}), 0},
		// F16 rounds weights below 6e-5 to subnormals: close, not equal
		{"f16", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": convert(orig, "F16")}), 2e-3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load(tt.dir, cpu.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if d := maxDiff(firstLogits(t, m, "square_56"), ref); d > tt.tol {
				t.Errorf("logits max |diff| %.3g > %.3g", d, tt.tol)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	orig := readST(t, filepath.Join(fixture.ModelDir("tiny-untied"), "model.safetensors"))
	without := func(name string) []stTensor {
		return slices.DeleteFunc(slices.Clone(orig), func(x stTensor) bool { return x.name == name })
	}
	reshaped := slices.Clone(orig)
	for i, x := range reshaped {
		if x.name == "model.layers.1.self_attn.q_proj.weight" {
			reshaped[i].shape = []int64{16, 64}
		}
	}
	int8s := slices.Clone(orig)
	for i, x := range int8s {
		if x.name == "model.norm.weight" {
			int8s[i] = stTensor{x.name, "I8", []int64{int64(len(x.data))}, x.data}
		}
	}
	tie := func(s string) string {
		return strings.Replace(s, `"tie_word_embeddings": false,
  "transformers_version"`, `"tie_word_embeddings": true,
  "transformers_version"`, 1)
	}

	tests := []struct {
		name    string
		dir     string
		wantErr string
	}{
		{"untied without lm_head", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": without("lm_head.weight")}), "missing tensor lm_head.weight"},
		{"missing layer weight", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": without("visual.blocks.1.mlp.up_proj.bias")}), "missing tensor visual.blocks.1.mlp.up_proj.bias"},
		{"shape", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": reshaped}), "tensor model.layers.1.self_attn.q_proj.weight: shape [16 64]"},
		{"dtype", modelDir(t, "tiny-untied", nil, map[string][]stTensor{"model.safetensors": int8s}), "dtype I8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.dir, cpu.Options{}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}

	// Tied config: lm_head.weight may be absent (the tied fixture has none) or present.
	tied := modelDir(t, "tiny-untied", tie, map[string][]stTensor{"model.safetensors": orig})
	m, err := Load(tied, cpu.Options{}, nil)
	if err != nil {
		t.Fatalf("tied config with lm_head present: %v", err)
	}
	m.Close()
}

// TestCorruptFiles: broken weight files are errors, never crashes.
func TestCorruptFiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixture.ModelDir("tiny-tied"), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	hlen := binary.LittleEndian.Uint64(raw)
	tests := map[string][]byte{
		"empty":             nil,
		"short":             raw[:5],
		"header past end":   binary.LittleEndian.AppendUint64(nil, 1<<40),
		"truncated data":    raw[:len(raw)-1000],
		"truncated header":  raw[:8+hlen/2],
		"not json":          append(binary.LittleEndian.AppendUint64(nil, 4), []byte("nope")...),
		"offsets past data": append(binary.LittleEndian.AppendUint64(nil, 62), []byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}        `)...),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			dir := modelDir(t, "tiny-tied", nil, nil)
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(dir, cpu.Options{}, nil); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
				t.Fatalf("err = %v, want one naming the file", err)
			}
		})
	}
	if _, err := Load(t.TempDir(), cpu.Options{}, nil); err == nil {
		t.Error("loading an empty directory succeeded")
	}
}

func ExampleNew() {
	m, err := Load(fixture.ModelDir("tiny-untied"), cpu.Options{Threads: 2}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	c, err := fixture.LoadCase("square_56")
	if err != nil {
		fmt.Println(err)
		return
	}
	img, err := c.EngineImage()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := engine.Generate(context.Background(), m, engine.Request{
		IDs: c.InputIDs, Images: []model.Image{img}, MaxNewTokens: 4,
		StopIDs: []int32{151645, 151643},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Random weights' words: what matters is that they are transformers' (the golden's first four).
	var want []int32
	for _, g := range golden.Cases {
		if g.Case == c.Name {
			want = g.Tokens[:4]
		}
	}
	fmt.Println(len(res.Tokens), slices.Equal(res.Tokens, want), res.Finish, res.PromptTokens, res.ImageTokens)
	// Output: 4 true length 31 4
}

// TestChunkedPrefill: a prompt prefilled in two calls (the second attending to the first's
// cache) gives the logits of one call.
func TestChunkedPrefill(t *testing.T) {
	m := loadFixture(t, "tiny-untied", cpu.Options{})
	ctx := context.Background()
	c, img := fixture.MustCase(t, "partial_406x238")
	want := firstLogits(t, m, c.Name)

	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := model.PromptPositions(m.Config(), c.InputIDs, []model.Grid{c.Grid()})
	if err != nil {
		t.Fatal(err)
	}
	split := len(c.InputIDs) - 7 // the image in the first chunk, the question's tail in the second
	part := func(a, b int) model.Positions {
		return model.Positions{T: pos.T[a:b], H: pos.H[a:b], W: pos.W[a:b], Delta: pos.Delta}
	}
	seq, err := m.NewSequence(len(c.InputIDs) + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if _, err := m.Prefill(ctx, seq, model.Prompt{IDs: c.InputIDs[:split], Positions: part(0, split), Images: []*model.Embeddings{emb}}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Prefill(ctx, seq, model.Prompt{IDs: c.InputIDs[split:], Positions: part(split, len(c.InputIDs))})
	if err != nil {
		t.Fatal(err)
	}
	if seq.Len() != len(c.InputIDs) {
		t.Fatalf("sequence holds %d tokens, want %d", seq.Len(), len(c.InputIDs))
	}
	if d := maxDiff(got, want); d > 1e-5 {
		t.Errorf("chunked prefill logits max |diff| %.3g", d)
	}
}
