package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/internal/poll"
)

func TestPrefillChunks(t *testing.T) {
	const I = 9 // the image placeholder
	tests := []struct {
		name   string
		ids    []int32
		tokens []int // per image
		limit  int
		margin int // tokens of an image's block before and after its placeholders
		want   []chunk
	}{
		{"whole", []int32{1, 2, I, I, 3}, []int{2}, 0, 0, []chunk{{0, 5, 1}}},
		{"text only", []int32{1, 2, 3, 4, 5}, nil, 2, 0, []chunk{{0, 2, 0}, {2, 4, 0}, {4, 5, 0}}},
		{"image not split", []int32{1, I, I, I, 2, 3}, []int{3}, 3, 0, []chunk{{0, 1, 0}, {1, 4, 1}, {4, 6, 0}}},
		{"image longer than the limit", []int32{1, I, I, I, I, I, 2}, []int{5}, 2, 0, []chunk{{0, 1, 0}, {1, 6, 1}, {6, 7, 0}}},
		{"image fills the piece", []int32{I, I, 1, 2, I, 3}, []int{2, 1}, 2, 0, []chunk{{0, 2, 1}, {2, 4, 0}, {4, 6, 1}}},
		{"two images in one piece", []int32{I, 1, I, 2}, []int{1, 1}, 8, 0, []chunk{{0, 4, 2}}},
		{"limit one", []int32{1, I, I, 2}, []int{2}, 1, 0, []chunk{{0, 1, 0}, {1, 3, 1}, {3, 4, 0}}},
		{"an image in two spans", []int32{1, I, I, 5, 6, I, 2, I}, []int{3, 1}, 2, 0, []chunk{{0, 1, 0}, {1, 6, 1}, {6, 8, 1}}},
		{"adjacent runs of two images", []int32{I, I, I}, []int{1, 2}, 1, 0, []chunk{{0, 1, 1}, {1, 3, 1}}},
		// a bidirectional block (margin 1: <|vision_start|> 7, <|vision_end|> 8) stays whole
		{"block kept whole", []int32{1, 2, 7, I, I, 8, 3}, []int{2}, 2, 1, []chunk{{0, 2, 0}, {2, 6, 1}, {6, 7, 0}}},
		{"block after a cut text", []int32{1, 7, I, I, 8, 3, 4}, []int{2}, 3, 1, []chunk{{0, 1, 0}, {1, 5, 1}, {5, 7, 0}}},
		{"block fits with text", []int32{1, 7, I, 8, 3, 4}, []int{1}, 4, 1, []chunk{{0, 4, 1}, {4, 6, 0}}},
		{"block at the prompt's start and end", []int32{7, I, 8}, []int{1}, 1, 1, []chunk{{0, 3, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := prefillChunks(tt.ids, I, tt.limit, tt.margin, tt.tokens); !slices.Equal(got, tt.want) {
				t.Errorf("prefillChunks = %v, want %v", got, tt.want)
			}
		})
	}
}

// poolModel is a Batcher whose every logit step answers token (last input token + 1) % 8, with
// a pool of blocks tokens: enough to see admission wait and passes hold several sequences.
type poolModel struct {
	cfg   *model.Config
	mu    sync.Mutex
	free  int
	peak  int // most sequences alive at once
	alive int
	sizes []int // inputs per pass
	steps int   // tokens appended to every sequence so far
	// meet, when joined is set, is how many sequences every pass waits for (the first passes
	// then hold them together): joined is closed once they are alive
	meet   int
	joined chan struct{}
	met    bool
}

type poolSeq struct {
	m      *poolModel
	n, cap int
	closed bool
}

func (s *poolSeq) Len() int { return s.n }
func (s *poolSeq) Cap() int { return s.cap }
func (s *poolSeq) Reset()   { s.n = 0 }
func (s *poolSeq) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.m.free += s.cap
		s.m.alive--
	}
	return nil
}

func newPoolModel(tokens int) *poolModel {
	return &poolModel{free: tokens, cfg: &model.Config{ModelType: "pool", Text: model.TextConfig{Vocab: 8, MaxPositions: 64},
		Vision: model.VisionConfig{InChannels: 1, TemporalPatchSize: 1, PatchSize: 1, MergeSize: 1, OutHidden: 1}, ImageTokenID: 7}}
}

func (m *poolModel) Config() *model.Config { return m.cfg }
func (m *poolModel) Limits() model.Limits {
	return model.Limits{ContextLength: 64, MaxImages: 1, MaxImagePatches: 4, MaxGridSide: 4}
}
func (m *poolModel) EncodeVision(context.Context, model.Image) (*model.Embeddings, error) {
	return nil, errors.New("no vision")
}
func (m *poolModel) Close() error { return nil }
func (m *poolModel) NewSequence(capacity int) (model.Sequence, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if capacity > m.free {
		return nil, fmt.Errorf("%d tokens wanted, %d free: %w", capacity, m.free, ml.ErrKVFull)
	}
	m.free -= capacity
	m.alive++
	m.peak = max(m.peak, m.alive)
	if m.joined != nil && !m.met && m.alive >= m.meet {
		m.met = true
		close(m.joined)
	}
	return &poolSeq{m: m, cap: capacity}, nil
}
func (m *poolModel) Prefill(context.Context, model.Sequence, model.Prompt) ([]float32, error) {
	return nil, errors.New("use Forward")
}
func (m *poolModel) DecodeStep(context.Context, model.Sequence, int32, int32) ([]float32, error) {
	return nil, errors.New("use Forward")
}

func (m *poolModel) Forward(_ context.Context, batch []model.Input) ([]model.Output, error) {
	if m.joined != nil {
		select {
		case <-m.joined:
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("a pass waited 10 s for %d sequences to be alive", m.meet)
		}
	}
	m.mu.Lock()
	m.sizes = append(m.sizes, len(batch))
	m.mu.Unlock()
	out := make([]model.Output, len(batch))
	for i, in := range batch {
		s := in.Seq.(*poolSeq)
		if s.closed || s.n+len(in.IDs) > s.cap {
			return nil, fmt.Errorf("input %d: sequence closed or full: %w", i, ml.ErrInvalidInput)
		}
		s.n += len(in.IDs)
		m.mu.Lock()
		m.steps += len(in.IDs)
		m.mu.Unlock()
		out[i].Argmax = (in.IDs[len(in.IDs)-1] + 1) % 6
	}
	return out, nil
}

func TestSchedulerAdmitsByBlocks(t *testing.T) {
	m := newPoolModel(40) // room for two requests of 4 + 16 tokens at once
	// the first pass waits for a second request's sequence: the two then share passes
	m.meet, m.joined = 2, make(chan struct{})
	s, err := NewScheduler(m, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Generate(t.Context(), Request{IDs: []int32{int32(i % 6), 1, 2, 3}, MaxNewTokens: 16, IgnoreEOS: true})
			if err == nil && !slices.Equal(res.Tokens[:3], []int32{4, 5, 0}) {
				err = fmt.Errorf("tokens %v", res.Tokens)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if m.peak != 2 || m.free != 40 {
		t.Errorf("peak %d sequences (want 2: the pool's room), %d tokens free at the end (want 40)", m.peak, m.free)
	}
	if slices.Max(m.sizes) < 2 {
		t.Errorf("passes of %v inputs: no pass held two requests", m.sizes)
	}
	// the passes by batch class are the model's passes by size, and their time is the phases'
	// (after Close: a pass's time is added after its outputs went back)
	s.Close()
	st := s.Stats()
	var want, got [batchClasses]int64
	for _, n := range m.sizes {
		want[batchClass(n)]++
	}
	for _, ph := range []int{phasePrefill, phaseDecode} {
		var spent time.Duration
		for c, ps := range st.ByBatch[ph] {
			got[c] += ps.Passes
			spent += ps.Spent
		}
		if spent != st.Spent[ph] {
			t.Errorf("%s: %v by batch class, %v in all", PhaseNames[ph], spent, st.Spent[ph])
		}
	}
	if got != want || st.Passes != int64(len(m.sizes)) {
		t.Errorf("passes by batch class %v (of %d), want %v from the model's pass sizes %v", got, st.Passes, want, m.sizes)
	}
}

func TestBatchClass(t *testing.T) {
	for n, want := range map[int]string{1: "1", 2: "2-3", 3: "2-3", 4: "4-7", 7: "4-7", 8: "8-15", 31: "16-31", 32: "32-63", 63: "32-63", 64: "64+", 1000: "64+"} {
		if got := BatchClasses[batchClass(n)]; got != want {
			t.Errorf("batch %d in class %q, want %q", n, got, want)
		}
	}
}

// A request waiting for blocks is admitted before later ones that would fit sooner: short
// requests arriving all the time must not starve a long one.
func TestSchedulerAdmitsInArrivalOrder(t *testing.T) {
	m := newPoolModel(40)
	s, _ := NewScheduler(m, SchedulerOptions{})
	defer s.Close()
	var (
		mu    sync.Mutex
		order []string
	)
	started := func(name string) func(int32) error {
		once := sync.OnceFunc(func() { mu.Lock(); order = append(order, name); mu.Unlock() })
		return func(int32) error { once(); return nil }
	}
	hold, first := make(chan struct{}), make(chan struct{})
	go func() { // a: 20 of the 40 tokens, held until the others queue
		_, _ = s.Generate(context.Background(), Request{IDs: []int32{1}, MaxNewTokens: 19, IgnoreEOS: true,
			OnToken: func(int32) error { close(first); <-hold; return ErrStop }})
	}()
	<-first
	waitQueued := func(n int) {
		t.Helper()
		poll.Until(t, 10*time.Second, fmt.Sprintf("%d requests waiting for blocks", n), func() string {
			s.mu.Lock()
			defer s.mu.Unlock()
			if got := len(s.admit); got != n {
				return fmt.Sprintf("%d waiting", got)
			}
			return ""
		})
	}
	var wg sync.WaitGroup
	run := func(name string, req Request) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req.IgnoreEOS, req.OnToken = true, started(name)
			if _, err := s.Generate(t.Context(), req); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	run("long", Request{IDs: make([]int32, 14), MaxNewTokens: 16}) // 30 tokens: waits for a's 20
	waitQueued(1)
	run("short", Request{IDs: []int32{1}, MaxNewTokens: 19}) // 20 tokens: would fit now, waits behind
	waitQueued(2)
	close(hold)
	wg.Wait()
	if !slices.Equal(order, []string{"long", "short"}) {
		t.Errorf("started %v, want [long short]: the request that waited first goes first", order)
	}
	if m.free != 40 {
		t.Errorf("%d of 40 tokens free at the end", m.free)
	}
}

func TestSchedulerRefusesWhatNeverFits(t *testing.T) {
	m := newPoolModel(10)
	s, _ := NewScheduler(m, SchedulerOptions{})
	defer s.Close()
	_, err := s.Generate(t.Context(), Request{IDs: []int32{1, 2}, MaxNewTokens: 16})
	if !errors.Is(err, ml.ErrKVFull) {
		t.Fatalf("a request larger than the idle pool: %v, want ErrKVFull", err)
	}
}

func TestSchedulerCancelWhileWaitingForBlocks(t *testing.T) {
	m := newPoolModel(20)
	s, _ := NewScheduler(m, SchedulerOptions{})
	defer s.Close()
	hold := make(chan struct{})
	first := make(chan struct{})
	go func() {
		_, _ = s.Generate(context.Background(), Request{IDs: []int32{1}, MaxNewTokens: 16, IgnoreEOS: true,
			OnToken: func(int32) error { close(first); <-hold; return ErrStop }})
	}()
	<-first // the pool is held
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := s.Generate(ctx, Request{IDs: []int32{1}, MaxNewTokens: 16})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for blocks past the deadline: %v", err)
	}
	close(hold)
}

func TestSchedulerClose(t *testing.T) {
	m := newPoolModel(64)
	s, _ := NewScheduler(m, SchedulerOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Generate(t.Context(), Request{IDs: []int32{1}, MaxNewTokens: 2}); !errors.Is(err, ml.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if _, err := NewScheduler(&fakeOnly{m}, SchedulerOptions{}); !errors.Is(err, model.ErrUnsupported) {
		t.Fatalf("a model without Forward: %v, want ErrUnsupported", err)
	}
}

// fakeOnly hides poolModel's Forward.
type fakeOnly struct{ m *poolModel }

func (f *fakeOnly) Config() *model.Config                     { return f.m.Config() }
func (f *fakeOnly) Limits() model.Limits                      { return f.m.Limits() }
func (f *fakeOnly) NewSequence(n int) (model.Sequence, error) { return f.m.NewSequence(n) }
func (f *fakeOnly) Close() error                              { return nil }
func (f *fakeOnly) EncodeVision(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	return f.m.EncodeVision(ctx, img)
}
func (f *fakeOnly) Prefill(ctx context.Context, s model.Sequence, p model.Prompt) ([]float32, error) {
	return f.m.Prefill(ctx, s, p)
}
func (f *fakeOnly) DecodeStep(ctx context.Context, s model.Sequence, tok, pos int32) ([]float32, error) {
	return f.m.DecodeStep(ctx, s, tok, pos)
}

// visionModel is a poolModel whose tower takes batches: an image's single row is its first
// pixel, and an image whose first pixel is negative fails (alone, or the batch it is in).
type visionModel struct {
	*poolModel
	batches []int // images per EncodeVisionBatch call
}

func (m *visionModel) EncodeVision(_ context.Context, img model.Image) (*model.Embeddings, error) {
	if img.Pixels[0] < 0 {
		return nil, fmt.Errorf("bad pixels: %w", ml.ErrInvalidInput)
	}
	return &model.Embeddings{Tokens: 1, Dim: 1, Data: []float32{img.Pixels[0]}}, nil
}

func (m *visionModel) EncodeVisionBatch(ctx context.Context, imgs []model.Image) ([]*model.Embeddings, error) {
	m.batches = append(m.batches, len(imgs))
	out := make([]*model.Embeddings, len(imgs))
	for i, img := range imgs {
		e, err := m.EncodeVision(ctx, img)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		out[i] = e
	}
	return out, nil
}

// TestSchedulerEncodesImagesTogether: the images of a round go to the tower in one batch, and a
// batch that fails is retried image by image, so that a bad image fails its own request only.
func TestSchedulerEncodesImagesTogether(t *testing.T) {
	m := &visionModel{poolModel: newPoolModel(64)}
	s := &Scheduler{m: m, opts: SchedulerOptions{}.withDefaults()}
	jobs := func(px ...float32) []*imageJob {
		var js []*imageJob
		for _, p := range px {
			js = append(js, &imageJob{img: model.Image{Pixels: []float32{p}, Grid: model.Grid{T: 1, H: 1, W: 1}}, finish: make(chan struct{})})
		}
		return js
	}
	good := jobs(1, 2, 3)
	s.encode(good)
	for i, j := range good {
		<-j.finish
		if j.err != nil || j.out.Data[0] != float32(i+1) {
			t.Errorf("image %d: %v, %v", i, j.out, j.err)
		}
	}
	mixed := jobs(4, -1, 5)
	s.encode(mixed)
	for i, j := range mixed {
		<-j.finish
		if bad := i == 1; bad != (j.err != nil) || !bad && j.out.Data[0] != mixed[i].img.Pixels[0] {
			t.Errorf("image %d (pixel %v): %v, %v", i, j.img.Pixels[0], j.out, j.err)
		}
	}
	if want := []int{3, 3}; !slices.Equal(m.batches, want) {
		t.Errorf("batches of %v images, want %v", m.batches, want)
	}
	// one pass for the good batch; the mixed one's, then one an image
	if got, want := s.Stats(), (SchedulerStats{Images: 6, VisionPasses: 5, VisionRetries: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}

	// VisionAlone: one image a pass, the batch path never taken
	alone := &Scheduler{m: m, opts: SchedulerOptions{VisionAlone: true}.withDefaults()}
	imgs := jobs(6, 7)
	alone.encode(imgs)
	for i, j := range imgs {
		<-j.finish
		if j.err != nil || j.out.Data[0] != float32(6+i) {
			t.Errorf("alone, image %d: %v, %v", i, j.out, j.err)
		}
	}
	if !slices.Equal(m.batches, []int{3, 3}) {
		t.Errorf("VisionAlone took the batch path: batches %v", m.batches)
	}
}

// TestSchedulerTake checks the passes' inputs: a prefill pass carries the decode steps waiting,
// first, in the room its chunks leave (the chunks get what a pass of their own would), and the
// decode pass has the rest; DecodeApart keeps them apart.
func TestSchedulerTake(t *testing.T) {
	chunk := func(n int) *job { return &job{in: model.Input{IDs: make([]int32, n)}} }
	dec := func() *job { return &job{in: model.Input{IDs: []int32{1}}, decode: true} }
	for _, tc := range []struct {
		name          string
		opts          SchedulerOptions
		prefill, rest []int // indexes into the queue below
	}{
		{"decodes ride along, first", SchedulerOptions{}, []int{1, 2, 4, 0, 3}, nil},
		{"apart", SchedulerOptions{DecodeApart: true}, []int{0, 3}, []int{1, 2, 4}},
		{"the room the chunks leave: inputs", SchedulerOptions{MaxBatch: 3}, []int{1, 0, 3}, []int{2, 4}},
		{"the room the chunks leave: tokens", SchedulerOptions{StepTokens: 7}, []int{1, 0, 3}, []int{2, 4}},
		{"a chunk over the budget still goes", SchedulerOptions{StepTokens: 2}, []int{0}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := []*job{chunk(3), dec(), dec(), chunk(3), dec()}
			s := &Scheduler{opts: tc.opts.withDefaults(), ready: slices.Clone(queue)}
			var prefill, rest []int
			for _, j := range s.take(false) {
				prefill = append(prefill, slices.Index(queue, j))
			}
			for _, j := range s.take(true) {
				rest = append(rest, slices.Index(queue, j))
			}
			if !slices.Equal(prefill, tc.prefill) || !slices.Equal(rest, tc.rest) {
				t.Errorf("prefill pass %v, decode pass %v; want %v, %v", prefill, rest, tc.prefill, tc.rest)
			}
		})
	}
	s := &Scheduler{opts: SchedulerOptions{}.withDefaults(), ready: []*job{dec(), dec()}}
	if got := s.take(false); len(got) != 0 {
		t.Errorf("a prefill pass of %d inputs with no chunk waiting", len(got))
	}
}

// TestSchedulerTakeImagesBesideAPass: a tower loop beside another loop's pass takes images only
// once they make its share of a pass (VisionPatches / loops); alone, or for the main loop, it
// takes what waits.
func TestSchedulerTakeImagesBesideAPass(t *testing.T) {
	img := func() *imageJob { return &imageJob{img: model.Image{Grid: model.Grid{T: 1, H: 1, W: 1}}} }
	for _, tc := range []struct {
		name        string
		busy, queue int
		loop        bool
		want        int
	}{
		{"another pass, under the share", 1, 3, true, 0},
		{"another pass, the share", 1, 4, true, 4},
		{"no other pass", 0, 1, true, 1},
		{"the main loop", 1, 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Scheduler{opts: SchedulerOptions{VisionPatches: 8}.withDefaults(), vloops: 2, vbusy: tc.busy}
			for range tc.queue {
				s.images = append(s.images, img())
			}
			got := s.takeImages(tc.loop)
			if len(got) != tc.want || len(s.images) != tc.queue-tc.want {
				t.Fatalf("took %d of %d (%d left), want %d", len(got), tc.queue, len(s.images), tc.want)
			}
			if want := tc.busy + min(tc.want, 1); tc.loop && s.vbusy != want {
				t.Errorf("busy loops %d, want %d", s.vbusy, want)
			}
		})
	}
}

// lanesModel is a visionModel with two tower lanes whose image of pixel 1 waits in the tower
// until hold is closed (entered closes as it begins).
type lanesModel struct {
	*visionModel
	mu            sync.Mutex
	entered, hold chan struct{}
}

func (m *lanesModel) ParallelVision() bool { return true }
func (m *lanesModel) VisionLanes() int     { return 2 }

func (m *lanesModel) EncodeVision(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	if img.Pixels[0] == 1 {
		close(m.entered)
		<-m.hold
	}
	return m.visionModel.EncodeVision(ctx, img)
}

func (m *lanesModel) EncodeVisionBatch(ctx context.Context, imgs []model.Image) ([]*model.Embeddings, error) {
	m.mu.Lock()
	m.batches = append(m.batches, len(imgs))
	m.mu.Unlock()
	out := make([]*model.Embeddings, len(imgs))
	for i, img := range imgs {
		var err error
		if out[i], err = m.EncodeVision(ctx, img); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// heldScheduler starts a scheduler over m whose work waits until hold is closed: unhold closes
// it (once; also at the test's end, before the scheduler's Close, which waits for the pass).
func heldScheduler(t *testing.T, m model.Model, opts SchedulerOptions, hold chan struct{}) (*Scheduler, func()) {
	t.Helper()
	s, err := NewScheduler(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	unhold := func() { release.Do(func() { close(hold) }) }
	t.Cleanup(func() {
		unhold()
		s.Close()
	})
	return s, unhold
}

// TestSchedulerVisionLanes: with two lanes, a second tower pass runs while the first is still
// in the tower, once the images waiting make half a pass (two of VisionPatches 4): images 2 and
// 3 are encoded together while image 1 waits.
func TestSchedulerVisionLanes(t *testing.T) {
	m := &lanesModel{visionModel: &visionModel{poolModel: newPoolModel(64)}, entered: make(chan struct{}), hold: make(chan struct{})}
	s, unhold := heldScheduler(t, m, SchedulerOptions{VisionPatches: 4}, m.hold)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	encode := func(px float32) chan float32 {
		out := make(chan float32, 1)
		go func() {
			e, err := s.Encode(ctx, model.Image{Pixels: []float32{px}, Grid: model.Grid{T: 1, H: 1, W: 1}})
			if err != nil {
				t.Error(err)
				out <- -1
				return
			}
			out <- e.Data[0]
		}()
		return out
	}
	first := encode(1)
	select {
	case <-m.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("image 1 never reached the tower")
	}
	second, third := encode(2), encode(3)
	for i, c := range []chan float32{second, third} {
		if v := <-c; v != float32(i+2) {
			t.Errorf("image %d: row %v", i+2, v)
		}
	}
	unhold()
	if v := <-first; v != 1 {
		t.Errorf("image 1: row %v", v)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Equal(m.batches, []int{2}) {
		t.Errorf("tower batches %v, want [2] (images 2 and 3 together, beside image 1's pass)", m.batches)
	}
}

// laneModel is a visionModel whose tower runs beside its other calls (ParallelEncoder), and whose
// Forward waits, once it has begun (entered), until hold is closed.
type laneModel struct {
	*visionModel
	entered, hold chan struct{}
	once          sync.Once
}

func (m *laneModel) ParallelVision() bool { return true }

func (m *laneModel) Forward(ctx context.Context, batch []model.Input) ([]model.Output, error) {
	m.once.Do(func() { close(m.entered) })
	<-m.hold
	return m.poolModel.Forward(ctx, batch)
}

// TestSchedulerParallelVision: with a ParallelEncoder model the tower has a loop of its own, so
// an image is encoded while a decoder pass is still running (a scheduler with one loop would
// leave it waiting behind that pass), and the requests still end as they would.
func TestSchedulerParallelVision(t *testing.T) {
	m := &laneModel{visionModel: &visionModel{poolModel: newPoolModel(64)}, entered: make(chan struct{}), hold: make(chan struct{})}
	s, unhold := heldScheduler(t, m, SchedulerOptions{}, m.hold)
	gen := make(chan error, 1)
	go func() {
		_, err := s.Generate(t.Context(), Request{IDs: []int32{1, 2}, MaxNewTokens: 3})
		gen <- err
	}()
	select {
	case <-m.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no decoder pass began")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	e, err := s.Encode(ctx, model.Image{Pixels: []float32{3}, Grid: model.Grid{T: 1, H: 1, W: 1}})
	if err != nil || e.Data[0] != 3 {
		t.Fatalf("encoding beside a running pass: %v, %v", e, err)
	}
	unhold()
	if err := <-gen; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Images != 1 || st.VisionPasses != 1 {
		t.Errorf("stats %+v: want one image in one vision pass", st)
	}
}

// latestValue keeps the latest value a hook put (the hook never blocks); a test awaits one.
type latestValue struct{ c chan int }

func latest() latestValue { return latestValue{make(chan int, 1)} }

// put replaces the value kept (a single goroutine puts: the scheduler's loop).
func (l latestValue) put(v int) {
	select {
	case <-l.c:
	default:
	}
	l.c <- v
}

// take drops the value kept, if any.
func (l latestValue) take() {
	select {
	case <-l.c:
	default:
	}
}

// await waits up to 10 s for a value put, and fails unless it is want.
func (l latestValue) await(t *testing.T, want int, what string) {
	t.Helper()
	select {
	case got := <-l.c:
		if got != want {
			t.Fatalf("%d %s, want %d", got, what, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10 s for the scheduler's loop to report %s", what)
	}
}

// total is the tokens appended to every sequence so far.
func (m *poolModel) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.steps
}

// TestSchedulerChains: a greedy request's decode steps are queued by the scheduler, so a pass
// does not wait for a request that has not yet taken its last token (a slow client) and its
// steps run ahead of it; the request still takes every token in order, a stop or cancel on its
// side ends the chain with its sequence freed, and a request with DecodeByRequest waits for its
// client as before.
func TestSchedulerChains(t *testing.T) {
	const max = 12
	want := []int32{4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3} // (last + 1) % 6 from the prompt's 3
	tests := []struct {
		name     string
		byReq    bool
		stopAt   int  // OnToken's ErrStop at this token (0: none)
		cancelAt int  // the context cancelled at this token (0: none)
		ahead    bool // steps run while the client holds its first token
	}{
		{"chained", false, 0, 0, true},
		{"chained, stop string", false, 3, 0, true},
		{"chained, cancel", false, 0, 2, true},
		{"by request", true, 0, 0, false},
		{"by request, stop string", true, 3, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newPoolModel(64)
			idle := latest()
			s, err := NewScheduler(m, SchedulerOptions{DecodeByRequest: tt.byReq, waits: func(held bool) {
				if !held {
					idle.put(m.total())
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			hold, holding := make(chan struct{}), make(chan struct{})
			var got []int32
			req := Request{IDs: []int32{1, 2, 3}, MaxNewTokens: max, IgnoreEOS: true, OnToken: func(id int32) error {
				got = append(got, id)
				if len(got) == 1 {
					close(holding)
					<-hold // a client still writing its first token
				}
				switch len(got) {
				case tt.stopAt:
					return ErrStop
				case tt.cancelAt:
					cancel()
				}
				return nil
			}}
			done := make(chan struct{})
			var res *Result
			go func() {
				defer close(done)
				res, err = s.Generate(ctx, req)
			}()
			// while the client holds its first token the loop runs every step (chained) or none
			// (by request) and then goes idle: what the cache holds once it is idle says which
			select {
			case <-holding:
			case <-time.After(10 * time.Second):
				t.Fatal("no first token within 10 s")
			}
			idle.take() // an idle round before the token was taken
			s.wake()    // a round now, whatever the loop was doing: it ends idle
			cached := 3
			if tt.ahead {
				cached = 3 + max - 1
			}
			idle.await(t, cached, "tokens in the cache when the loop is idle while the client holds its first token")
			close(hold)
			<-done
			switch {
			case tt.cancelAt > 0:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err %v, want context.Canceled", err)
				}
			case err != nil:
				t.Fatal(err)
			case tt.stopAt > 0:
				if res.Finish != FinishStop || !slices.Equal(res.Tokens, want[:tt.stopAt]) {
					t.Errorf("%v %v, want stop after %v", res.Finish, res.Tokens, want[:tt.stopAt])
				}
			default:
				if res.Finish != FinishLength || !slices.Equal(res.Tokens, want) {
					t.Errorf("%v %v, want length with %v", res.Finish, res.Tokens, want)
				}
			}
			s.mu.Lock()
			live, ended, ready, queued := s.live, s.ended, len(s.ready), len(s.queued)
			s.mu.Unlock()
			m.mu.Lock()
			alive := m.alive
			m.mu.Unlock()
			if live != 0 || ended != 0 || ready != 0 || queued != 0 || alive != 0 {
				t.Errorf("after the request: %d live (%d ended), %d inputs ready, %d queued, %d sequences open; want none", live, ended, ready, queued, alive)
			}
		})
	}
}

// TestSchedulerHoldUntil: a round of decode steps alone (at least DecodeHoldRows) waits while
// the tower has images whose prompts will come, up to the deadline; a prompt ready, too few
// steps, or a tower idle since before holdGrace end it at once.
func TestSchedulerHoldUntil(t *testing.T) {
	now := time.Now()
	deadline := now.Add(10 * time.Millisecond)
	dec := func() *job { return &job{decode: true} }
	for _, tc := range []struct {
		name          string
		ready         []*job
		images, vbusy int
		vended        time.Time
		want          time.Time
	}{
		{"a prompt ready", []*job{dec(), {}, dec()}, 1, 1, now, now},
		{"too few steps", []*job{dec()}, 1, 1, now, now},
		{"images waiting", []*job{dec(), dec()}, 1, 0, time.Time{}, deadline},
		{"a tower pass", []*job{dec(), dec()}, 0, 1, time.Time{}, deadline},
		{"a pass just ended", []*job{dec(), dec()}, 0, 0, now.Add(-time.Millisecond), now.Add(holdGrace - time.Millisecond)},
		{"a pass ended long ago", []*job{dec(), dec()}, 0, 0, now.Add(-time.Second), now.Add(holdGrace - time.Second)},
		{"the deadline first", []*job{dec(), dec()}, 0, 0, deadline, deadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Scheduler{opts: SchedulerOptions{DecodeHoldRows: 2}.withDefaults(), ready: tc.ready, vbusy: tc.vbusy, vended: tc.vended}
			for range tc.images {
				s.images = append(s.images, &imageJob{})
			}
			if got := s.holdUntil(now, deadline); !got.Equal(tc.want) {
				t.Errorf("held until %v, want %v", got.Sub(now), tc.want.Sub(now))
			}
		})
	}
}

// TestSchedulerDecodeHold: with DecodeHold, a request's decode steps wait while an image is in
// the tower, and the image's prompt pass carries them; the hold ends at DecodeHold when no
// prompt comes, and the answers are the ones without it.
func TestSchedulerDecodeHold(t *testing.T) {
	want := []int32{4, 5, 0, 1} // (last + 1) % 6 from the prompt's 3
	text := Request{IDs: []int32{1, 2, 3}, MaxNewTokens: len(want), IgnoreEOS: true}
	image := Request{IDs: []int32{1, 7, 3}, MaxNewTokens: len(want), IgnoreEOS: true,
		Images: []model.Image{{Pixels: []float32{1}, Grid: model.Grid{T: 1, H: 1, W: 1}}}}
	for _, tc := range []struct {
		name    string
		hold    time.Duration
		release bool // the image leaves the tower once the text request's steps are held
	}{
		{"the prompt carries the steps", 10 * time.Second, true},
		{"no prompt within the hold", 20 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &lanesModel{visionModel: &visionModel{poolModel: newPoolModel(64)}, entered: make(chan struct{}), hold: make(chan struct{})}
			held := latest()
			s, unhold := heldScheduler(t, m, SchedulerOptions{DecodeHold: tc.hold, DecodeHoldRows: 1, waits: func(h bool) {
				if h {
					held.put(m.total())
				}
			}}, m.hold)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			type answer struct {
				res *Result
				err error
			}
			run := func(req Request) chan answer {
				c := make(chan answer, 1)
				go func() {
					res, err := s.Generate(ctx, req)
					c <- answer{res, err}
				}()
				return c
			}
			withImage := run(image)
			<-m.entered // its image is in the tower
			plain := run(text)
			if !tc.release {
				a := <-plain // every step held for 20 ms, then run alone
				if a.err != nil || !slices.Equal(a.res.Tokens, want) {
					t.Fatalf("text request beside the tower: %v, %v; want %v", a.res, a.err, want)
				}
				if held := s.Stats().Spent[phaseHold]; held < time.Duration(len(want)-1)*tc.hold {
					t.Errorf("held %v in all, want at least %d holds of %v", held, len(want)-1, tc.hold)
				}
				unhold()
				if a := <-withImage; a.err != nil || !slices.Equal(a.res.Tokens, want) {
					t.Fatalf("image request: %v, %v; want %v", a.res, a.err, want)
				}
				return
			}
			// the text request's prompt ran; its first decode step waits for the image's prompt: the
			// loop holds it, with the prompt's tokens alone in the caches
			held.await(t, len(text.IDs), "tokens in the caches when the loop holds a decode step for the image in the tower")
			unhold()
			for _, c := range []chan answer{plain, withImage} {
				if a := <-c; a.err != nil || !slices.Equal(a.res.Tokens, want) {
					t.Fatalf("%v, %v; want %v", a.res, a.err, want)
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			// the text prompt alone, then the held step and the image's prompt in one pass
			if len(m.sizes) < 2 || m.sizes[0] != 1 || m.sizes[1] != 2 {
				t.Errorf("passes of %v inputs, want [1 2 ...]", m.sizes)
			}
		})
	}
}
