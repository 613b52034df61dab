package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// fakeModel is a deterministic test double: the logits of a step put all mass on a token given
// by script[step], and it records every call so tests can see what Generate asked for.
type fakeModel struct {
	cfg    *model.Config
	lim    model.Limits
	script []int32
	calls  []string
	pos    []int32 // DecodeStep positions
	fed    []int32 // DecodeStep tokens
	step   int
	closed int
}

type fakeSeq struct {
	m      *fakeModel
	n, cap int
	closed bool
}

func (s *fakeSeq) Len() int     { return s.n }
func (s *fakeSeq) Cap() int     { return s.cap }
func (s *fakeSeq) Reset()       { s.n = 0 }
func (s *fakeSeq) Close() error { s.closed = true; s.m.closed++; return nil }

func newFake(script ...int32) *fakeModel {
	cfg := &model.Config{
		ModelType: "fake",
		Text:      model.TextConfig{Hidden: 4, Vocab: 16, MaxPositions: 64},
		Vision: model.VisionConfig{
			InChannels: 1, TemporalPatchSize: 1, PatchSize: 1, MergeSize: 2, OutHidden: 4,
		},
		ImageTokenID: 15,
	}
	return &fakeModel{cfg: cfg, lim: model.Limits{ContextLength: 32, MaxImages: 2, MaxImagePatches: 16, MaxGridSide: 4}, script: script}
}

func (m *fakeModel) Config() *model.Config { return m.cfg }
func (m *fakeModel) Limits() model.Limits  { return m.lim }
func (m *fakeModel) Close() error          { return nil }

func (m *fakeModel) EncodeVision(_ context.Context, img model.Image) (*model.Embeddings, error) {
	m.calls = append(m.calls, "vision")
	n := img.Grid.Tokens(2)
	return &model.Embeddings{Tokens: n, Dim: 4, Data: make([]float32, n*4)}, nil
}

func (m *fakeModel) NewSequence(capacity int) (model.Sequence, error) {
	m.calls = append(m.calls, fmt.Sprintf("seq %d", capacity))
	return &fakeSeq{m: m, cap: capacity}, nil
}

func (m *fakeModel) logits() []float32 {
	l := make([]float32, m.cfg.Text.Vocab)
	l[m.script[m.step%len(m.script)]] = 1
	m.step++
	return l
}

func (m *fakeModel) Prefill(_ context.Context, seq model.Sequence, p model.Prompt) ([]float32, error) {
	m.calls = append(m.calls, fmt.Sprintf("prefill %d delta %d images %d", len(p.IDs), p.Positions.Delta, len(p.Images)))
	seq.(*fakeSeq).n += len(p.IDs)
	return m.logits(), nil
}

func (m *fakeModel) DecodeStep(_ context.Context, seq model.Sequence, token, pos int32) ([]float32, error) {
	m.calls = append(m.calls, "decode")
	m.fed = append(m.fed, token)
	m.pos = append(m.pos, pos)
	seq.(*fakeSeq).n++
	return m.logits(), nil
}

func TestGenerate(t *testing.T) {
	// 2 text tokens, a 2x2-token image (4x4 patches), 1 text token: delta = 5 - 7 = -2
	prompt := []int32{1, 2, 15, 15, 15, 15, 3}
	image := model.Image{Pixels: make([]float32, 16), Grid: model.Grid{T: 1, H: 4, W: 4}}
	tests := []struct {
		name       string
		script     []int32
		req        engine.Request
		want       []int32
		finish     engine.FinishReason
		stopToken  int32
		wantDecode int
	}{
		{
			name:   "length",
			script: []int32{5, 6, 7, 8},
			req:    engine.Request{MaxNewTokens: 3, StopIDs: []int32{9}},
			want:   []int32{5, 6, 7}, finish: engine.FinishLength, wantDecode: 2,
		},
		{
			name:   "stop token ends and is dropped",
			script: []int32{5, 9, 7},
			req:    engine.Request{MaxNewTokens: 8, StopIDs: []int32{9}},
			want:   []int32{5}, finish: engine.FinishStop, stopToken: 9, wantDecode: 1,
		},
		{
			name:   "ignore eos",
			script: []int32{5, 9, 7},
			req:    engine.Request{MaxNewTokens: 4, StopIDs: []int32{9}, IgnoreEOS: true},
			want:   []int32{5, 9, 7, 5}, finish: engine.FinishLength, wantDecode: 3,
		},
		{
			name:   "stop at once",
			script: []int32{9},
			req:    engine.Request{MaxNewTokens: 4, StopIDs: []int32{9}},
			want:   nil, finish: engine.FinishStop, stopToken: 9, wantDecode: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFake(tt.script...)
			req := tt.req
			req.IDs, req.Images = prompt, []model.Image{image}
			var streamed []int32
			req.OnToken = func(id int32) error { streamed = append(streamed, id); return nil }
			res, err := engine.Generate(context.Background(), m, req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Tokens, tt.want) || !slices.Equal(streamed, tt.want) {
				t.Errorf("tokens %v, streamed %v, want %v", res.Tokens, streamed, tt.want)
			}
			if res.Finish != tt.finish || res.StopToken != tt.stopToken {
				t.Errorf("finish %q/%d, want %q/%d", res.Finish, res.StopToken, tt.finish, tt.stopToken)
			}
			if res.PromptTokens != 7 || res.ImageTokens != 4 {
				t.Errorf("usage %d/%d, want 7/4", res.PromptTokens, res.ImageTokens)
			}
			wantCalls := []string{"vision", fmt.Sprintf("seq %d", 7+req.MaxNewTokens), "prefill 7 delta -2 images 1"}
			for range tt.wantDecode {
				wantCalls = append(wantCalls, "decode")
			}
			if !slices.Equal(m.calls, wantCalls) {
				t.Errorf("calls %q, want %q", m.calls, wantCalls)
			}
			// the i-th fed token sits at absolute index 7+i and rotates at 7+i-2
			for i, p := range m.pos {
				if p != int32(7+i-2) || m.fed[i] != tt.want[i] {
					t.Errorf("decode %d: token %d at %d, want %d at %d", i, m.fed[i], p, tt.want[i], 7+i-2)
				}
			}
			if m.closed != 1 {
				t.Errorf("sequence closed %d times", m.closed)
			}
		})
	}
}

func TestGenerateCachedEmbeddings(t *testing.T) {
	m := newFake(5)
	emb := &model.Embeddings{Tokens: 1, Dim: 4, Data: make([]float32, 4)}
	res, err := engine.Generate(context.Background(), m, engine.Request{
		IDs:          []int32{1, 15, 2},
		Images:       []model.Image{{Grid: model.Grid{T: 1, H: 2, W: 2}, Embeddings: emb}},
		MaxNewTokens: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(m.calls, "vision") || res.ImageTokens != 1 {
		t.Errorf("calls %q, image tokens %d: cached embeddings must skip the vision tower", m.calls, res.ImageTokens)
	}
}

// deviceFake is fakeModel with a DeviceEncoder: its embeddings stand for rows on a device.
type deviceFake struct {
	*fakeModel
	released int
	fail     bool // Prefill fails
}

type fakeRows struct{ m *deviceFake }

func (r fakeRows) Release() { r.m.released++ }

func (m *deviceFake) EncodeVisionDevice(_ context.Context, img model.Image) (*model.Embeddings, error) {
	m.calls = append(m.calls, "vision device")
	return &model.Embeddings{Tokens: img.Grid.Tokens(2), Dim: 4, Device: fakeRows{m}}, nil
}

func (m *deviceFake) Prefill(ctx context.Context, seq model.Sequence, p model.Prompt) ([]float32, error) {
	if _, err := p.Flatten(m.cfg); err != nil {
		return nil, err
	}
	for i, e := range p.Images {
		if e.Device == nil || e.Data != nil {
			return nil, fmt.Errorf("image %d: rows not on the device (%d host values)", i, len(e.Data))
		}
	}
	if m.fail {
		return nil, errors.New("prefill failed")
	}
	return m.fakeModel.Prefill(ctx, seq, p)
}

// TestGenerateDeviceEmbeddings checks that a DeviceEncoder's rows go to its Prefill and are
// released once, also when the prefill fails.
func TestGenerateDeviceEmbeddings(t *testing.T) {
	for _, fail := range []bool{false, true} {
		m := &deviceFake{fakeModel: newFake(5), fail: fail}
		image := model.Image{Pixels: make([]float32, 4), Grid: model.Grid{T: 1, H: 2, W: 2}}
		_, err := engine.Generate(context.Background(), m, engine.Request{
			IDs: []int32{1, 15, 2, 15}, Images: []model.Image{image, image}, MaxNewTokens: 2,
		})
		if (err != nil) != fail {
			t.Fatalf("fail=%v: err = %v", fail, err)
		}
		if slices.Contains(m.calls, "vision") || m.released != 2 {
			t.Errorf("fail=%v: calls %q, %d releases: want the device encoder, both rows released", fail, m.calls, m.released)
		}
	}
}

// greedyFake is fakeModel with a GreedyModel: the same script, as token ids.
type greedyFake struct{ *fakeModel }

func (m greedyFake) PrefillGreedy(ctx context.Context, seq model.Sequence, p model.Prompt) (int32, error) {
	l, err := m.fakeModel.Prefill(ctx, seq, p)
	m.calls[len(m.calls)-1] += " greedy"
	return ml.Argmax(l), err
}

func (m greedyFake) DecodeStepGreedy(ctx context.Context, seq model.Sequence, token, pos int32) (int32, error) {
	l, err := m.fakeModel.DecodeStep(ctx, seq, token, pos)
	m.calls[len(m.calls)-1] += " greedy"
	return ml.Argmax(l), err
}

// TestGenerateGreedyModel checks that greedy requests take a GreedyModel's device argmax (same
// tokens, positions and stops) and that sampled ones read the logits.
func TestGenerateGreedyModel(t *testing.T) {
	for _, tc := range []struct {
		temp   float64
		greedy bool
	}{{0, true}, {0.7, false}} {
		m := greedyFake{newFake(5, 6, 7, 2)}
		res, err := engine.Generate(context.Background(), m, engine.Request{
			IDs: []int32{1, 2, 3}, MaxNewTokens: 8, StopIDs: []int32{2},
			// top_p 0.01 keeps only the scripted token: a sampled request with a known answer
			Sampling: engine.Sampling{Temperature: tc.temp, TopP: 0.01},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, []int32{5, 6, 7}) || res.Finish != engine.FinishStop || !slices.Equal(m.pos, []int32{3, 4, 5}) {
			t.Errorf("temp %v: tokens %v finish %v positions %v", tc.temp, res.Tokens, res.Finish, m.pos)
		}
		want := []string{"seq 11", "prefill 3 delta 0 images 0", "decode", "decode", "decode"}
		if tc.greedy {
			for i := 1; i < len(want); i++ {
				want[i] += " greedy"
			}
		}
		if !slices.Equal(m.calls, want) {
			t.Errorf("temp %v: calls %q, want %q", tc.temp, m.calls, want)
		}
	}
}

// TestGenerateLogprobs: a greedy request with logprobs reads the logits on the host (not the
// GreedyModel's device argmax), and each answer token gets its entry, reported before OnToken.
func TestGenerateLogprobs(t *testing.T) {
	m := greedyFake{newFake(5, 6, 2)}
	var seen []string
	res, err := engine.Generate(context.Background(), m, engine.Request{
		IDs: []int32{1}, MaxNewTokens: 8, StopIDs: []int32{2}, Logprobs: true, TopLogprobs: 2,
		OnLogprob: func(lp engine.TokenLogprob) { seen = append(seen, fmt.Sprintf("lp %d", lp.ID)) },
		OnToken:   func(id int32) error { seen = append(seen, fmt.Sprintf("tok %d", id)); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.calls {
		if strings.HasSuffix(c, "greedy") {
			t.Fatalf("calls %q: the device argmax was used for a logprobs request", m.calls)
		}
	}
	if !slices.Equal(seen, []string{"lp 5", "tok 5", "lp 6", "tok 6"}) || len(res.Logprobs) != 2 {
		t.Fatalf("events %q, %d entries", seen, len(res.Logprobs))
	}
	// the fake's logits are one 1 among vocab-1 zeros
	vocab := float64(m.cfg.Text.Vocab)
	want := float32(1 - math.Log(math.E+vocab-1))
	lp := res.Logprobs[1]
	if lp.ID != 6 || math.Abs(float64(lp.Logprob-want)) > 1e-6 || len(lp.Top) != 2 || lp.Top[0].ID != 6 || lp.Top[1].ID != 0 {
		t.Errorf("entry %+v, want id 6 logprob %v, top [6 0]", lp, want)
	}
}

// TestFlattenMixedEmbeddings refuses a prompt whose images are partly on a device.
func TestFlattenMixedEmbeddings(t *testing.T) {
	m := &deviceFake{fakeModel: newFake(5)}
	host := &model.Embeddings{Tokens: 1, Dim: 4, Data: make([]float32, 4)}
	dev := &model.Embeddings{Tokens: 1, Dim: 4, Device: fakeRows{m}}
	both := &model.Embeddings{Tokens: 1, Dim: 4, Data: make([]float32, 4), Device: fakeRows{m}}
	pos := model.Positions{T: make([]int32, 3), H: make([]int32, 3), W: make([]int32, 3)}
	for _, tc := range []struct {
		name   string
		images []*model.Embeddings
		ok     bool
	}{
		{"host", []*model.Embeddings{host, host}, true},
		{"device", []*model.Embeddings{dev, dev}, true},
		{"mixed", []*model.Embeddings{host, dev}, false},
		{"data and device", []*model.Embeddings{both, both}, false},
	} {
		_, err := model.Prompt{IDs: []int32{15, 1, 15}, Positions: pos, Images: tc.images}.Flatten(m.cfg)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ml.ErrInvalidInput)) {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestGenerateCancel(t *testing.T) {
	m := newFake(5, 6, 7, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	_, err := engine.Generate(ctx, m, engine.Request{
		IDs: []int32{1, 2}, MaxNewTokens: 10,
		OnToken: func(int32) error {
			if n++; n == 2 {
				cancel()
			}
			return nil
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := slices.Index(m.calls, "decode"); got < 0 || len(m.calls)-got != 1 {
		t.Errorf("calls %q: want exactly one decode step before the cancel is seen", m.calls)
	}

	m = newFake(5)
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := engine.Generate(ctx, m, engine.Request{IDs: []int32{1}, MaxNewTokens: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(m.calls) != 0 {
		t.Errorf("calls %q after a canceled context", m.calls)
	}
}

func TestGenerateCallbackError(t *testing.T) {
	m := newFake(5, 6)
	stop := errors.New("client gone")
	_, err := engine.Generate(context.Background(), m, engine.Request{
		IDs: []int32{1}, MaxNewTokens: 5, OnToken: func(int32) error { return stop },
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the callback's error", err)
	}
}

// TestGenerateCallbackStop: ErrStop from OnToken (a stop string) ends the answer with
// FinishStop, keeping the token that completed it.
func TestGenerateCallbackStop(t *testing.T) {
	m := newFake(5, 6, 7, 8)
	res, err := engine.Generate(context.Background(), m, engine.Request{
		IDs: []int32{1}, MaxNewTokens: 5, OnToken: func(id int32) error {
			if id == 6 {
				return engine.ErrStop
			}
			return nil
		},
	})
	if err != nil || res.Finish != engine.FinishStop || !slices.Equal(res.Tokens, []int32{5, 6}) {
		t.Fatalf("got %+v, %v; want tokens [5 6], finish stop", res, err)
	}
}

// TestGenerateRefusesFirst checks that a request over a bound reaches no model method.
func TestGenerateRefusesFirst(t *testing.T) {
	m := newFake(5)
	_, err := engine.Generate(context.Background(), m, engine.Request{IDs: make([]int32, 30), MaxNewTokens: 3})
	var be *model.BoundsError
	if !errors.Is(err, model.ErrContextExceeded) || !errors.As(err, &be) || be.Got != 33 || be.Limit != 32 {
		t.Fatalf("err = %v, want a BoundsError 33 > 32", err)
	}
	if len(m.calls) != 0 {
		t.Errorf("calls %q: a refused request must run nothing", m.calls)
	}
}

func TestCheck(t *testing.T) {
	cfg := newFake().cfg
	lim := model.Limits{ContextLength: 32, MaxImages: 1, MaxImagePatches: 16, MaxGridSide: 4}
	px := func(n int) []float32 { return make([]float32, n) }
	tests := []struct {
		name string
		req  engine.Request
		is   error // nil: accepted
	}{
		{"ok", engine.Request{IDs: []int32{1, 15, 2}, MaxNewTokens: 29, Images: []model.Image{{Pixels: px(4), Grid: model.Grid{T: 1, H: 2, W: 2}}}}, nil},
		{"context exactly full", engine.Request{IDs: []int32{1, 2}, MaxNewTokens: 30}, nil},
		{"context exceeded", engine.Request{IDs: []int32{1, 2}, MaxNewTokens: 31}, model.ErrContextExceeded},
		{"image tokens count", engine.Request{IDs: append(make([]int32, 2), 15, 15, 15, 15), MaxNewTokens: 27, Images: []model.Image{{Pixels: px(16), Grid: model.Grid{T: 1, H: 4, W: 4}}}}, model.ErrContextExceeded},
		{"grid side", engine.Request{IDs: []int32{15, 15, 15, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(12 * 2), Grid: model.Grid{T: 1, H: 6, W: 4}}}}, model.ErrImageTooLarge},
		{"too many patches", engine.Request{IDs: []int32{15, 15, 15, 15, 15, 15, 15, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(32), Grid: model.Grid{T: 2, H: 4, W: 4}}}}, model.ErrImageTooLarge},
		{"too many images", engine.Request{IDs: []int32{15, 1, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(4), Grid: model.Grid{T: 1, H: 2, W: 2}}, {Pixels: px(4), Grid: model.Grid{T: 1, H: 2, W: 2}}}}, model.ErrImageTooLarge},
		{"empty prompt", engine.Request{MaxNewTokens: 1}, ml.ErrInvalidInput},
		{"no new tokens", engine.Request{IDs: []int32{1}}, ml.ErrInvalidInput},
		{"id outside vocab", engine.Request{IDs: []int32{16}, MaxNewTokens: 1}, ml.ErrInvalidInput},
		{"negative id", engine.Request{IDs: []int32{-1}, MaxNewTokens: 1}, ml.ErrInvalidInput},
		{"placeholders without image", engine.Request{IDs: []int32{15}, MaxNewTokens: 1}, ml.ErrInvalidInput},
		{"image without placeholders", engine.Request{IDs: []int32{1}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(4), Grid: model.Grid{T: 1, H: 2, W: 2}}}}, ml.ErrInvalidInput},
		{"one image in two runs", engine.Request{IDs: []int32{15, 1, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(8), Grid: model.Grid{T: 2, H: 2, W: 2}}}}, nil},
		{"a run left over", engine.Request{IDs: []int32{15, 1, 15, 1, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(8), Grid: model.Grid{T: 2, H: 2, W: 2}}}}, ml.ErrInvalidInput},
		{"placeholder count", engine.Request{IDs: []int32{15, 15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(4), Grid: model.Grid{T: 1, H: 2, W: 2}}}}, ml.ErrInvalidInput},
		{"pixel count", engine.Request{IDs: []int32{15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(3), Grid: model.Grid{T: 1, H: 2, W: 2}}}}, ml.ErrInvalidInput},
		{"odd grid", engine.Request{IDs: []int32{15}, MaxNewTokens: 1, Images: []model.Image{{Pixels: px(6), Grid: model.Grid{T: 1, H: 3, W: 2}}}}, ml.ErrInvalidInput},
		{"bad embeddings", engine.Request{IDs: []int32{15}, MaxNewTokens: 1, Images: []model.Image{{Grid: model.Grid{T: 1, H: 2, W: 2}, Embeddings: &model.Embeddings{Tokens: 1, Dim: 3, Data: px(3)}}}}, ml.ErrInvalidInput},
		{"negative temperature", engine.Request{IDs: []int32{1}, MaxNewTokens: 1, Sampling: engine.Sampling{Temperature: -1}}, ml.ErrInvalidInput},
		{"top_p over one", engine.Request{IDs: []int32{1}, MaxNewTokens: 1, Sampling: engine.Sampling{Temperature: 1, TopP: 1.5}}, ml.ErrInvalidInput},
		{"nan temperature", engine.Request{IDs: []int32{1}, MaxNewTokens: 1, Sampling: engine.Sampling{Temperature: math.NaN()}}, ml.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := engine.Check(cfg, lim, &tt.req)
			if tt.is == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
		})
	}
}
