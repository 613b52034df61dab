package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// DefaultDecodeHold is SchedulerOptions.DecodeHold's default: on the H200 at c=64 holds of 10
// and 30 ms gave the same images/s, 1-2% more than none, with a lower p95 latency and TTFT.
const DefaultDecodeHold = 30 * time.Millisecond

// SchedulerOptions tune a [Scheduler]; zero values take the defaults.
type SchedulerOptions struct {
	// MaxBatch caps the inputs of one pass (default 64).
	MaxBatch int
	// StepTokens caps the tokens of one pass (default 2048): prefill chunks, and the waiting
	// decode steps in the room they leave (take). A prompt is cut into chunks of at most this
	// many tokens (a run of image placeholders stays whole), so a long prompt shares passes with
	// running decodes instead of stalling them.
	StepTokens int
	// Gather is how long a pass waits for running sequences that have not sent their next
	// input yet, e.g. while a slow client takes its last token (default 2ms). A pass starts as
	// soon as every running sequence has one waiting.
	Gather time.Duration
	// VisionPatches caps the image patches the vision tower takes between two rounds of passes,
	// in one tower pass when the model is a [BatchEncoder] (default 6144: nine 426x320 photos
	// of Qwen2.5-VL); a larger image goes alone. With tower loops of their own, a loop beside
	// another's pass waits for its share (VisionPatches / loops): on the H200 at c=64, 6144
	// (passes of ~5 photos) gave 1-2% more images/s than 8192 (~7), their prompts reaching the
	// decoder more often, so that it held fewer rounds.
	VisionPatches int
	// VisionAlone runs the tower on one image at a time even when the model can take several
	// in one pass (the switch for a backend where batched vision is not yet validated).
	VisionAlone bool
	// DecodeApart runs decode steps in passes of their own even when prefill chunks wait. By
	// default a pass with prefill chunks also carries every waiting decode step (first, so that
	// a backend attends to them in one kernel): the weights are read once for both, where a
	// decode pass of its own would read them again (on the H200 a 54-row decode pass of the 3B
	// costs ~5 ms; beside 1,000 prefill rows, ~1 ms more).
	DecodeApart bool
	// DecodeByRequest has every decode step sent by its request once it has taken the token
	// before, as [Generate] does alone. By default a greedy request's steps are queued by the
	// scheduler as soon as a pass gives their token (a [chain]), and the request follows them.
	DecodeByRequest bool
	// DecodeHold is how long a round whose inputs are decode steps alone may wait for the prompt
	// of an image the tower is encoding, so that the prompt's prefill pass carries the steps (0:
	// DefaultDecodeHold; negative: never). A pass of decode steps alone reads every weight for
	// them: on the H200 at c=64 a 32-63-row pass of the 3B took 7.6 ms beside the tower, where
	// 1,000 prefill rows carry them for ~1 ms more. Only with a tower loop of its own
	// ([ParallelEncoder]).
	DecodeHold time.Duration
	// DecodeHoldRows is the fewest decode steps a round holds (default 32): under a lighter load
	// a token's latency counts for more than a pass's weight reads.
	DecodeHoldRows int

	// waits, set by tests, is called each time the loop is about to wait: idle, with no input
	// ready, until something wakes it (held false), or holding a round of decode steps for a
	// tower's prompt (held true).
	waits func(held bool)
}

func (o SchedulerOptions) withDefaults() SchedulerOptions {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if o.StepTokens <= 0 {
		o.StepTokens = 2048
	}
	if o.Gather <= 0 {
		o.Gather = 2 * time.Millisecond
	}
	if o.VisionPatches <= 0 {
		o.VisionPatches = 6144
	}
	if o.DecodeHold == 0 {
		o.DecodeHold = DefaultDecodeHold
	}
	if o.DecodeHoldRows <= 0 {
		o.DecodeHoldRows = 32
	}
	return o
}

// Scheduler runs the requests of one [Batcher] model together, iteration by iteration. A round
// runs the vision tower on the images waiting (up to a patch budget), then one pass of prefill
// chunks of new prompts (up to a token budget) that also carries the next token of every running
// sequence, or, when no prompt waits, a pass of those tokens alone; a request joins at the next
// round and leaves when it ends. The decode steps come first in a pass (a backend attends to
// them in one kernel over every sequence's cache), a pass of decode steps alone is the one
// backends record as a graph, and the token budget bounds the prefill pass that may delay them.
// Every call on the model comes from the scheduler's loop, so the tower, the prefills and the
// decodes take turns instead of contending for the model; a model whose tower runs beside its
// other calls ([ParallelEncoder]: a GPU stream of its own) gets loops of its own for the tower,
// one a lane ([VisionLaner]), so that images are encoded while the decoder's passes run. There, a
// round of decode steps alone may wait a little for the prompts of the images in the tower
// (DecodeHold), so that their prefill pass carries the steps.
//
// A sequence gives the same tokens alone or in any batch (the Batcher's contract), so each
// request's answer is the one [Generate] gives. A request waits for KV blocks while others hold
// them (admission by free blocks, in arrival order), and a cancelled one frees its blocks as soon
// as the pass it is in ends.
type Scheduler struct {
	m    model.Model
	b    model.Batcher
	opts SchedulerOptions

	mu     sync.Mutex
	ready  []*job        // inputs waiting for a pass, in arrival order
	queued []*job        // decode steps the chains queued this round: ready from the next
	images []*imageJob   // images waiting for the tower
	live   int           // sequences allocated and not yet released
	ended  int           // of those, the ones whose chain ended: they send no more inputs
	admit  []*waiter     // requests waiting for KV blocks, first come first served
	freed  chan struct{} // closed (and replaced) whenever blocks go back or the queue moves
	closed bool
	kick   chan struct{} // wakes the loop; buffered
	quit   chan struct{}
	done   chan struct{}
	// vkick, set when the tower has loops of its own (visionLoop, one a lane), wakes one; vwg
	// waits for them to end; vbusy (under mu) counts those in a pass, vloops all of them
	vkick         chan struct{}
	vwg           sync.WaitGroup
	vbusy, vloops int
	vended        time.Time // when a tower loop last ended a pass (under mu)

	passes, inputs, encoded     atomic.Int64
	visionPasses, visionRetries atomic.Int64
	spent                       [phases]atomic.Int64 // nanoseconds the loop spent in each phase
	// by batch-size class (BatchClasses): the passes (rounds of the tower) and their nanoseconds
	classPasses, classSpent [phases][batchClasses]atomic.Int64
}

// The phases of the loop's time: waiting for inputs (the device idles), the vision tower,
// prefill passes, decode passes, and decode steps held for the tower's prompts (DecodeHold).
const (
	phaseGather = iota
	phaseVision
	phasePrefill
	phaseDecode
	phaseHold
	phases
)

// PhaseNames name the phases of SchedulerStats.Spent, in order.
var PhaseNames = [phases]string{"gather", "vision", "prefill", "decode", "hold"}

// BatchClasses name the batch-size classes of SchedulerStats.ByBatch, powers of two: where a
// phase's time goes by the size of its passes (a decode pass of 40 rows should cost about one of
// 1: the weights are read once).
var BatchClasses = [batchClasses]string{"1", "2-3", "4-7", "8-15", "16-31", "32-63", "64+"}

const batchClasses = 7

// batchClass is n's index in BatchClasses.
func batchClass(n int) int {
	return min(max(bits.Len(uint(n))-1, 0), batchClasses-1)
}

// timed runs fn, a pass of n inputs (images for the tower; 0: not a pass), and adds its wall
// time to the phase and to the phase's batch class.
func (s *Scheduler) timed(phase, n int, fn func()) {
	t0 := time.Now()
	fn()
	d := int64(time.Since(t0))
	s.spent[phase].Add(d)
	if n > 0 {
		c := batchClass(n)
		s.classPasses[phase][c].Add(1)
		s.classSpent[phase][c].Add(d)
	}
}

// job is one input waiting for, or in, a pass.
type job struct {
	in     model.Input
	decode bool
	chain  *chain // the request's decode steps, queued by the scheduler after this one
	taken  bool   // in a pass: its caller waits for the pass before freeing the sequence
	out    model.Output
	err    error
	finish chan struct{}
}

// imageJob is one image waiting for, or in, the vision tower.
type imageJob struct {
	img    model.Image
	taken  bool
	out    *model.Embeddings
	err    error
	finish chan struct{}
}

// NewScheduler starts a scheduler over m, which must be a Batcher. Close stops it.
func NewScheduler(m model.Model, opts SchedulerOptions) (*Scheduler, error) {
	b, ok := m.(model.Batcher)
	if !ok {
		return nil, fmt.Errorf("model %s does not take batches: %w", m.Config().ModelType, model.ErrUnsupported)
	}
	s := &Scheduler{m: m, b: b, opts: opts.withDefaults(), freed: make(chan struct{}),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if pe, ok := m.(model.ParallelEncoder); ok && pe.ParallelVision() {
		s.vkick, s.vloops = make(chan struct{}, 1), 1
		if vl, ok := m.(model.VisionLaner); ok {
			s.vloops = max(vl.VisionLanes(), 1)
		}
		for range s.vloops {
			s.vwg.Go(s.visionLoop)
		}
	}
	go s.loop()
	return s, nil
}

// Generate runs req as [Generate] does, its passes shared with the other requests'.
func (s *Scheduler) Generate(ctx context.Context, req Request) (*Result, error) {
	d := driver{chunk: s.opts.StepTokens, encode: s.Encode, alloc: s.alloc, release: s.release, step: s.step}
	if !s.opts.DecodeByRequest {
		d.next, d.stop = s.next, s.stop
	}
	return generate(ctx, s.m, req, d)
}

// Encode runs the vision tower on img in the scheduler's next round, as [Encode] does (rows on
// the device when the model keeps them there: the caller releases them).
func (s *Scheduler) Encode(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	j := &imageJob{img: img, finish: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ml.ErrClosed
	}
	s.images = append(s.images, j)
	s.mu.Unlock()
	if s.parallel() {
		signal(s.vkick)
	} else {
		s.wake()
	}
	select {
	case <-j.finish:
		return j.out, j.err
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.images, j); i >= 0 && !j.taken {
			s.images = slices.Delete(s.images, i, i+1)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		<-j.finish
		if j.out != nil && j.out.Device != nil {
			j.out.Device.Release() // encoded for nobody
		}
		return nil, ctx.Err()
	}
}

// SchedulerStats are a scheduler's counters since it started.
type SchedulerStats struct {
	// Passes run, and the inputs they held (their ratio is the mean batch); Images encoded.
	Passes, Inputs, Images int64
	// VisionPasses are the vision-tower passes that encoded them (Images over VisionPasses is
	// the mean vision batch), VisionRetries the batches that failed and went again image by
	// image.
	VisionPasses, VisionRetries int64
	// Spent is the loop's wall time in each phase (PhaseNames): where a loaded server's time
	// goes, and how long the device sat waiting for the requests' next inputs (gather).
	Spent [phases]time.Duration
	// ByBatch splits the vision, prefill and decode phases by the size of their passes
	// (BatchClasses; for vision, the images of a round).
	ByBatch [phases][batchClasses]PassStats
}

// PassStats are the passes of one phase and batch class, and their wall time.
type PassStats struct {
	Passes int64
	Spent  time.Duration
}

// Stats reports the scheduler's counters.
func (s *Scheduler) Stats() SchedulerStats {
	st := SchedulerStats{Passes: s.passes.Load(), Inputs: s.inputs.Load(), Images: s.encoded.Load(),
		VisionPasses: s.visionPasses.Load(), VisionRetries: s.visionRetries.Load()}
	for i := range st.Spent {
		st.Spent[i] = time.Duration(s.spent[i].Load())
		for c := range st.ByBatch[i] {
			st.ByBatch[i][c] = PassStats{Passes: s.classPasses[i][c].Load(), Spent: time.Duration(s.classSpent[i][c].Load())}
		}
	}
	return st
}

// Close stops the loop after the pass in progress; requests still waiting fail with ErrClosed.
// It does not close the model.
func (s *Scheduler) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	waiting, images := append(s.ready, s.queued...), s.images
	s.ready, s.queued, s.images = nil, nil, nil
	s.broadcast() // requests waiting for blocks see closed
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	s.vwg.Wait()
	for _, j := range waiting {
		j.err = ml.ErrClosed
		close(j.finish)
	}
	for _, j := range images {
		j.err = ml.ErrClosed
		close(j.finish)
	}
	return nil
}

// alloc makes a sequence, waiting for blocks while other sequences hold them. Admission is first
// come, first served: while a request waits for blocks, later ones wait behind it even when they
// would fit, so that a long prompt is not starved by short ones taking every block that comes
// back (likely why, on the H200, 3B in fp32 at c=64 with the pool full, 1600x1200 images
// waited up to 118 s while 426x320 ones were answered in seconds).
func (s *Scheduler) alloc(ctx context.Context, capacity int) (model.Sequence, error) {
	w := new(waiter)
	s.mu.Lock()
	for {
		if s.closed {
			s.leave(w)
			s.mu.Unlock()
			return nil, ml.ErrClosed
		}
		if len(s.admit) == 0 || s.admit[0] == w {
			seq, err := s.m.NewSequence(capacity)
			switch {
			case err == nil:
				s.live++
				s.leave(w)
				s.mu.Unlock()
				return seq, nil
			case !errors.Is(err, ml.ErrKVFull) || s.live == 0: // alone and still too big: no wait would help
				s.leave(w)
				s.mu.Unlock()
				return nil, err
			}
		}
		if !slices.Contains(s.admit, w) {
			s.admit = append(s.admit, w)
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			s.mu.Lock()
			s.leave(w)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
}

// waiter is a request waiting for KV blocks, in s.admit: only its identity matters (the field
// gives it a size, so that two waiters are never the same pointer).
type waiter struct{ _ byte }

// leave takes w out of the admission queue (s.mu held) and wakes the waiters: the next in line
// may fit now.
func (s *Scheduler) leave(w *waiter) {
	if i := slices.Index(s.admit, w); i >= 0 {
		s.admit = slices.Delete(s.admit, i, i+1)
		s.broadcast()
	}
}

// broadcast wakes every alloc waiting (s.mu held).
func (s *Scheduler) broadcast() {
	close(s.freed)
	s.freed = make(chan struct{})
}

// release follows a sequence's Close: its blocks are back. c is its chain, if it had one.
func (s *Scheduler) release(c *chain) {
	s.mu.Lock()
	s.live--
	if c != nil && c.ended {
		s.ended--
		c.ended = false
	}
	s.broadcast()
	s.mu.Unlock()
	s.wake()
}

func (s *Scheduler) wake() { signal(s.kick) }

// signal wakes the loop waiting on c (buffered, one slot) without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// step queues one input for the next pass and waits for its output; c, when set, is the chain
// that continues the sequence after it.
func (s *Scheduler) step(ctx context.Context, in model.Input, decode bool, c *chain) (model.Output, error) {
	j := &job{in: in, decode: decode, chain: c, finish: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return model.Output{}, ml.ErrClosed
	}
	s.ready = append(s.ready, j)
	s.mu.Unlock()
	s.wake()
	select {
	case <-j.finish:
		return j.out, j.err
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.ready, j); i >= 0 && !j.taken {
			s.ready = slices.Delete(s.ready, i, i+1)
			s.mu.Unlock()
			return model.Output{}, ctx.Err()
		}
		s.mu.Unlock()
		<-j.finish // the pass writes the sequence's cache: the caller frees it after
		return model.Output{}, ctx.Err()
	}
}

// serve runs round, each time kick fires, until round finds nothing to do; it returns at quit.
func (s *Scheduler) serve(kick <-chan struct{}, round func() (busy bool)) {
	for {
		select {
		case <-kick:
		case <-s.quit:
			return
		}
		for round() {
		}
	}
}

// loop runs passes while inputs wait.
func (s *Scheduler) loop() {
	defer close(s.done)
	s.serve(s.kick, func() bool {
		s.mu.Lock()
		s.ready = append(s.ready, s.queued...)
		clear(s.queued)
		s.queued = s.queued[:0]
		s.mu.Unlock()
		s.timed(phaseGather, 0, s.gather)
		if s.opts.DecodeHold > 0 && s.parallel() {
			s.timed(phaseHold, 0, s.hold)
		}
		busy := false
		if imgs := s.visionRound(); len(imgs) > 0 {
			s.timed(phaseVision, len(imgs), func() { s.encode(imgs) })
			busy = true
		}
		for _, decode := range []bool{false, true} {
			if batch := s.take(decode); len(batch) > 0 {
				phase := phasePrefill
				if decode {
					phase = phaseDecode
				}
				s.timed(phase, len(batch), func() { s.run(batch) })
				busy = true
			}
		}
		if !busy && s.opts.waits != nil {
			s.opts.waits(false)
		}
		return busy
	})
}

// parallel reports whether the tower has a loop of its own (visionLoop).
func (s *Scheduler) parallel() bool { return s.vkick != nil }

// visionRound takes the images of the loop's next tower pass: none when the tower has a loop
// of its own.
func (s *Scheduler) visionRound() []*imageJob {
	if s.parallel() {
		return nil
	}
	return s.takeImages(false)
}

// visionLoop runs the tower on the images waiting, round after round, beside the loop's passes
// (a ParallelEncoder model); with several lanes, several of these run (takeImages says when one
// takes images while another is in a pass).
func (s *Scheduler) visionLoop() {
	s.serve(s.vkick, func() bool {
		imgs := s.takeImages(true)
		if len(imgs) == 0 {
			return false
		}
		s.timed(phaseVision, len(imgs), func() { s.encode(imgs) })
		s.mu.Lock()
		s.vbusy--
		s.vended = time.Now()
		s.mu.Unlock()
		if s.opts.DecodeHold > 0 {
			s.wake() // a held round looks again
		}
		return true
	})
}

// gather waits, at most opts.Gather, until every live sequence has an input waiting.
func (s *Scheduler) gather() {
	var timer *time.Timer
	for {
		s.mu.Lock()
		all := len(s.ready) == 0 || len(s.ready) >= s.live-s.ended
		s.mu.Unlock()
		if all {
			return
		}
		if timer == nil {
			timer = time.NewTimer(s.opts.Gather)
			defer timer.Stop()
		}
		select {
		case <-s.kick:
		case <-timer.C:
			return
		case <-s.quit:
			return
		}
	}
}

// holdGrace is how long after a tower pass ends a held round still waits for its prompts: the
// requests wake, take their place in the pool and send the prompt (tens of microseconds, unless
// a request waits for blocks).
const holdGrace = 2 * time.Millisecond

// hold waits, at most opts.DecodeHold, while the inputs ready are decode steps alone (at least
// opts.DecodeHoldRows) and prompts are coming: images in a tower pass or waiting for one, or a
// pass that ended within holdGrace.
func (s *Scheduler) hold() {
	deadline := time.Now().Add(s.opts.DecodeHold)
	for {
		s.mu.Lock()
		until := s.holdUntil(time.Now(), deadline)
		s.mu.Unlock()
		wait := time.Until(until)
		if wait <= 0 {
			return
		}
		if s.opts.waits != nil {
			s.opts.waits(true)
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.kick:
		case <-timer.C:
		case <-s.quit:
		}
		timer.Stop()
		select {
		case <-s.quit:
			return
		default:
		}
	}
}

// holdUntil is when a round held at now stops waiting (s.mu held): now when it should not.
func (s *Scheduler) holdUntil(now, deadline time.Time) time.Time {
	decodes := 0
	for _, j := range s.ready {
		if !j.decode {
			return now // a prompt: its pass carries the steps
		}
		decodes++
	}
	switch {
	case decodes < s.opts.DecodeHoldRows:
		return now
	case len(s.images) > 0 || s.vbusy > 0:
		return deadline
	}
	if until := s.vended.Add(holdGrace); until.Before(deadline) {
		return until // past when no pass ended lately
	}
	return deadline
}

// take removes the next pass's inputs from the queue, in arrival order, under opts.MaxBatch
// inputs and opts.StepTokens tokens (a first chunk over the limit runs alone): the decode steps
// (decode), or the prefill chunks and before them, in the room they leave, the decode steps
// waiting (unless opts.DecodeApart; the chunks get the room a pass of their own would).
func (s *Scheduler) take(decode bool) []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []*job
	tokens, inputs := 0, 0 // of the pass so far
	add := func(want bool) {
		for _, j := range s.ready {
			n := len(j.in.IDs)
			if j.taken || j.decode != want || inputs == s.opts.MaxBatch {
				continue
			}
			if inputs > 0 && tokens+n > s.opts.StepTokens {
				continue
			}
			j.taken = true
			batch = append(batch, j)
			tokens += n
			inputs++
		}
	}
	add(decode)
	if !decode && len(batch) > 0 && !s.opts.DecodeApart {
		chunks := batch
		batch = nil
		add(true) // the decode steps first: a backend attends to the leading one-row inputs at once
		batch = append(batch, chunks...)
	}
	s.ready = slices.DeleteFunc(s.ready, func(j *job) bool { return j.taken })
	return batch
}

// takeImages removes the images of the next vision step from the queue, in arrival order, under
// opts.VisionPatches patches (a first image over the limit goes alone). A tower loop (loop)
// beside another loop's pass takes them only once they make its share of a pass
// (VisionPatches / loops): the pass in progress ends soon, and a pass of the few images that
// came since would leave a few images for the next; the loop counts itself busy when it takes.
func (s *Scheduler) takeImages(loop bool) []*imageJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	if loop && s.vbusy > 0 {
		share, waiting := s.opts.VisionPatches/s.vloops, 0
		for _, j := range s.images {
			if waiting += j.img.Grid.Patches(); waiting >= share {
				break
			}
		}
		if waiting < share {
			return nil
		}
	}
	var out []*imageJob
	patches := 0
	for _, j := range s.images {
		n := j.img.Grid.Patches()
		if len(out) > 0 && patches+n > s.opts.VisionPatches {
			break
		}
		j.taken = true
		out = append(out, j)
		patches += n
	}
	// move the rest to the front: a resliced queue would keep the taken images' pixels reachable
	// from its backing array until an append reallocated it (1.3 GB of live heap on the CPU demo
	// server after 300 requests at c=24)
	n := copy(s.images, s.images[len(out):])
	clear(s.images[n:])
	s.images = s.images[:n]
	if loop && len(out) > 0 {
		s.vbusy++
	}
	return out
}

// encode runs the tower on the images: in one pass when the model is a BatchEncoder, else (or
// when the batch fails, so that a bad image fails its own request only) one image at a time. An
// image taken runs to its end (milliseconds) even if its request is cancelled meanwhile: Encode
// releases the rows then.
func (s *Scheduler) encode(imgs []*imageJob) {
	defer s.encoded.Add(int64(len(imgs)))
	if be, ok := s.m.(model.BatchEncoder); ok && len(imgs) > 1 && !s.opts.VisionAlone {
		in := make([]model.Image, len(imgs))
		for i, j := range imgs {
			in[i] = j.img
		}
		s.visionPasses.Add(1)
		if out, err := be.EncodeVisionBatch(context.Background(), in); err == nil {
			for i, j := range imgs {
				j.out = out[i]
				close(j.finish)
			}
			return
		}
		s.visionRetries.Add(1)
	}
	for _, j := range imgs {
		s.visionPasses.Add(1)
		j.out, j.err = Encode(context.Background(), s.m, j.img)
		close(j.finish)
	}
}

// run makes one pass over batch. A pass that fails is retried one input at a time, so that an
// input the model refuses fails its own request only.
func (s *Scheduler) run(batch []*job) {
	in := make([]model.Input, len(batch))
	for i, j := range batch {
		in[i] = j.in
	}
	s.passes.Add(1)
	s.inputs.Add(int64(len(batch)))
	out, err := s.b.Forward(context.Background(), in)
	switch {
	case err == nil:
		for i, j := range batch {
			j.out = out[i]
		}
	case len(batch) == 1:
		batch[0].err = err
	default:
		for i, j := range batch {
			o, err := s.b.Forward(context.Background(), in[i:i+1])
			if j.err = err; err == nil {
				j.out = o[0]
			}
		}
	}
	s.mu.Lock()
	for _, j := range batch {
		if j.chain != nil {
			s.follow(j)
		}
	}
	s.mu.Unlock()
	for _, j := range batch {
		close(j.finish)
	}
}

// chain is a greedy request's decode steps queued by the scheduler: when a pass gives a token,
// the step that feeds it is queued for the next round at once, where it used to wait for the
// request to wake, stream the token and send the step (at c=64 on the H200 the decoder's
// stream sat ~2% of a level in gather, waiting for the last of those). The scheduler runs ahead
// of a slow client, at most to its token budget; the request takes the outputs in order and
// stops the chain when it ends for a reason of its own (a stop string, a cancel, an error).
type chain struct {
	stop    map[int32]bool // tokens that end the answer
	left    int            // steps the scheduler may still queue
	pos     int32          // rotary position of the next step
	steps   []*job         // queued, in a pass or done, not yet taken by the request
	stopped bool           // the request has left: queue nothing more
	ended   bool           // no more steps will come: counted in Scheduler.ended until release
}

// follow queues the step after j, whose pass has ended, unless the chain ends there (s.mu held).
func (s *Scheduler) follow(j *job) {
	c := j.chain
	switch {
	case c.stopped:
	case j.err == nil && c.left > 0 && !c.stop[j.out.Argmax]:
		n := &job{in: model.DecodeInput(j.in.Seq, j.out.Argmax, c.pos, false), decode: true, chain: c, finish: make(chan struct{})}
		c.pos++
		c.left--
		c.steps = append(c.steps, n)
		s.queued = append(s.queued, n)
	case !c.ended:
		c.ended = true
		s.ended++
	}
}

// next waits for the chain's next step and returns its output.
func (s *Scheduler) next(ctx context.Context, c *chain) (model.Output, error) {
	s.mu.Lock()
	if len(c.steps) == 0 {
		s.mu.Unlock()
		return model.Output{}, errors.New("decode chain ended before its request") // generate and follow disagree
	}
	j := c.steps[0]
	c.steps = slices.Delete(c.steps, 0, 1)
	s.mu.Unlock()
	select {
	case <-j.finish:
		return j.out, j.err
	case <-ctx.Done():
		s.mu.Lock()
		c.steps = slices.Insert(c.steps, 0, j) // back to the head: stop settles it
		s.mu.Unlock()
		return model.Output{}, ctx.Err()
	}
}

// stop ends c for its request: steps not yet in a pass leave the queue, one in a pass is waited
// for (it writes the sequence's cache, which the request frees next).
func (s *Scheduler) stop(c *chain) {
	s.mu.Lock()
	c.stopped = true
	if !c.ended {
		c.ended = true
		s.ended++
	}
	var wait []*job
	for _, j := range c.steps {
		if j.taken {
			wait = append(wait, j)
			continue
		}
		s.ready = slices.DeleteFunc(s.ready, func(r *job) bool { return r == j })
		s.queued = slices.DeleteFunc(s.queued, func(r *job) bool { return r == j })
	}
	c.steps = nil
	s.mu.Unlock()
	for _, j := range wait {
		<-j.finish
	}
}
