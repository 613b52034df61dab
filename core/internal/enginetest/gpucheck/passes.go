package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/ml/cuda"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/internal/speed"
)

// passes times the engine's batched passes one kind at a time, outside the scheduler and HTTP:
// the vision tower over k images (model.BatchEncoder), a prefill of k prompts and a decode step
// of n sequences (model.Batcher), then rounds as the scheduler runs them at c=64 (5 images, 5
// prompts, 54 decodes). What a pass of each size costs says where a loaded server's time goes:
// a decode step of 48 rows should cost about one of 1 (the weights are read once).
func passes(args []string) error {
	fs := flag.NewFlagSet("passes", flag.ContinueOnError)
	mf := addModelFlags(fs, "photo_426x320")
	images := fs.String("images", "1,2,4,8,12", "images per vision pass")
	prompts := fs.String("prompts", "1,2,4,8", "prompts per prefill pass")
	decodes := fs.String("decodes", "1,2,4,8,16,32,48,64", "sequences per decode pass")
	iters := fs.Int("iters", 20, "timed passes per size (the median is printed)")
	round := fs.String("round", "5,5,54", "images, prompts and decodes of a scheduler round (empty: none)")
	ops := fs.Int("ops", 12, "with a round: time every op of one round's passes and print this many costliest of each (0: none; GPU only)")
	noMMA := fs.Bool("no-mma", false, "bf16 attention through cuBLAS and the CUDA-core flash kernel (not the tensor-core kernel)")
	noMMAMask := fs.Bool("no-mma-mask", false, "bf16 attention with key flags, a prefix, a bias or a bidirectional block through cuBLAS (not the tensor-core kernel's masked variant)")
	noGroup := fs.Bool("no-group-decode", false, "bf16 decode attention with a block a query head (not a block a KV group)")
	noWhole := fs.Bool("no-whole-decode", false, "bf16 decode attention over caches of at most 256 keys in merged 64-key splits (not a block over all of them)")
	equal := fs.Bool("equal-priority", false, "the decoder's stream at the lane's priority (not the greatest)")
	quack := fs.Bool("quack-swiglu", false, "bf16 gate/up products of 128 rows or more with SwiGLU in their epilogue (a build with the quack tag: scripts/gpu/swiglu-gemm)")
	quackVariant := fs.Int("quack-variant", 0, "-quack-swiglu's tile configuration without biases: the n-th of the build's (scripts/gpu/swiglu-gemm/export.py --variants)")
	quackBias := fs.Int("quack-bias-variant", 0, "-quack-swiglu's tile configuration with biases: the n-th of the build's (export.py --bias-variants)")
	quackLin := fs.Bool("quack-linear", false, "bf16 products of 128 rows or more through quack's plain product, not cuBLASLt (a build with the quack tag)")
	quackLinV := fs.Int("quack-linear-variant", 0, "-quack-linear's tile configuration without biases: the n-th of the build's (export.py --linear-variants)")
	quackLinB := fs.Int("quack-linear-bias-variant", 0, "-quack-linear's tile configuration with biases (export.py --linear-bias-variants)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var sizes [4][]int // images, prompts, decodes, a round
	for i, f := range []struct{ name, v string }{{"images", *images}, {"prompts", *prompts}, {"decodes", *decodes}, {"round", *round}} {
		var err error
		if sizes[i], err = ints(f.name, f.v); err != nil {
			return err
		}
	}
	if r := sizes[3]; len(r) != 0 && len(r) != 3 {
		return fmt.Errorf("-round %q: images,prompts,decodes", *round)
	}
	c, err := loadCase(*mf.cases, *mf.name)
	if err != nil {
		return err
	}
	ctx := context.Background()
	m, dev, err := load(*mf.model, *mf.backend, cuda.Options{Precision: *mf.prec, NoMMA: *noMMA, NoMMAMask: *noMMAMask, NoGroupDecode: *noGroup, NoWholeDecode: *noWhole, EqualPriority: *equal, QuackSwiGLU: *quack, QuackVariant: *quackVariant, QuackBiasVariant: *quackBias,
		QuackLinear: *quackLin, QuackLinearVariant: *quackLinV, QuackLinearBiasVariant: *quackLinB}, mf.lane())
	if err != nil {
		return err
	}
	defer m.Close()
	bat, ok := m.(model.Batcher)
	if !ok {
		return fmt.Errorf("%s takes no batches", m.Config().ModelType)
	}
	be, _ := m.(model.BatchEncoder)
	p := &passBench{m: m, b: bat, be: be, c: c, iters: *iters}
	if p.pos, err = model.PromptPositionsOf(m.Config(), c.InputIDs, []model.Image{c.image()}); err != nil {
		return err
	}
	fmt.Printf("passes: %s, %s, case %s (%d prompt tokens, %d patches), median of %d passes\n",
		dev.name, *mf.prec, c.Name, len(c.InputIDs), c.PixelRows, *iters)
	fmt.Printf("%-8s %5s %9s %12s\n", "pass", "size", "ms", "ms per input")
	row := func(kind string, n int, d time.Duration) {
		fmt.Printf("%-8s %5d %9.3f %12.3f\n", kind, n, ms(d), ms(d)/float64(n))
	}
	for _, k := range sizes[0] {
		d, err := p.vision(ctx, k)
		if err != nil {
			return fmt.Errorf("vision pass of %d: %w", k, err)
		}
		row("vision", k, d)
	}
	emb, err := engine.Encode(ctx, m, c.image())
	if err != nil {
		return err
	}
	if emb.Device != nil {
		defer emb.Device.Release()
	}
	p.emb = emb
	for _, k := range sizes[1] {
		d, err := p.prefill(ctx, k)
		if err != nil {
			return fmt.Errorf("prefill pass of %d: %w", k, err)
		}
		row("prefill", k, d)
	}
	graphs := func() int {
		if dev.graphs == nil {
			return 0
		}
		n, _ := dev.graphs()
		return n
	}
	for _, n := range sizes[2] {
		g0 := graphs()
		d, err := p.decode(ctx, n)
		if err != nil {
			return fmt.Errorf("decode pass of %d: %w", n, err)
		}
		row("decode", n, d)
		if dev.graphs != nil {
			fmt.Printf("         (%d of %d passes replayed a graph)\n", graphs()-g0, p.iters+2)
		}
	}
	if r := sizes[3]; len(r) == 3 {
		if err := p.rounds(ctx, r[0], r[1], r[2]); err != nil {
			return fmt.Errorf("rounds: %w", err)
		}
		if *ops > 0 && dev.setOps != nil {
			if err := p.opProfile(ctx, dev, r[0], r[1], r[2], *ops); err != nil {
				return fmt.Errorf("op profile: %w", err)
			}
		}
	}
	return nil
}

// opProfile times every op of one vision pass of k images, one prefill of q prompts and one
// decode step of d sequences (dependent launches and graphs off: each op's own time, launch gaps
// included) and prints the top costliest ops of each by their total.
func (p *passBench) opProfile(ctx context.Context, dev *device, k, q, d, top int) error {
	seqs, toks, err := p.prefilled(ctx, d, 2)
	if err != nil {
		return err
	}
	defer closeAll(seqs)
	kinds := []struct {
		name string
		run  func() error
	}{
		{fmt.Sprintf("vision pass of %d images", k), func() error { out, err := p.encode(ctx, k); release(out); return err }},
		{fmt.Sprintf("prefill pass of %d prompts", q), func() error { return p.prefillOnce(ctx, q) }},
		{fmt.Sprintf("decode pass of %d sequences", d), func() error { return p.step(ctx, seqs, toks, 0) }},
	}
	for _, kind := range kinds {
		dev.setOps(true)
		err := kind.run()
		st := dev.stages()
		dev.setOps(false)
		if err != nil {
			return err
		}
		slices.SortFunc(st, func(a, b stageTime) int { return cmpDesc(a.TotalMS, b.TotalMS) })
		total := 0.0
		for _, s := range st {
			total += s.TotalMS
		}
		fmt.Printf("ops of one %s: %.3f ms in %d kinds of op\n", kind.name, total, len(st))
		for _, s := range st[:min(top, len(st))] {
			fmt.Printf("  %8.3f ms %5d x %7.1f us  %s\n", s.TotalMS, s.Calls, 1000*s.TotalMS/float64(s.Calls), s.Stage)
		}
	}
	return nil
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

type passBench struct {
	m     model.Model
	b     model.Batcher
	be    model.BatchEncoder
	c     *caseFile
	pos   model.Positions
	emb   *model.Embeddings
	iters int
}

// median runs fn twice to warm up (graphs are recorded on a key's second run), then iters times.
func (p *passBench) median(fn func() error) (time.Duration, error) {
	var ts []float64
	for i := range p.iters + 2 {
		t := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if i >= 2 {
			ts = append(ts, float64(time.Since(t)))
		}
	}
	return time.Duration(speed.Percentile(ts, 50)), nil
}

// encode runs the tower on k copies of the case's image, in one pass where the model takes
// several (as the scheduler does).
func (p *passBench) encode(ctx context.Context, k int) ([]*model.Embeddings, error) {
	imgs := slices.Repeat([]model.Image{p.c.image()}, k)
	if p.be != nil && k > 1 {
		return p.be.EncodeVisionBatch(ctx, imgs)
	}
	var out []*model.Embeddings
	for _, img := range imgs {
		e, err := engine.Encode(ctx, p.m, img)
		if err != nil {
			release(out)
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func release(embs []*model.Embeddings) {
	for _, e := range embs {
		if e != nil && e.Device != nil {
			e.Device.Release()
		}
	}
}

func (p *passBench) vision(ctx context.Context, k int) (time.Duration, error) {
	return p.median(func() error {
		out, err := p.encode(ctx, k)
		release(out)
		return err
	})
}

// sequences makes n sequences room for the prompt and steps decode tokens.
func (p *passBench) sequences(n, steps int) ([]model.Sequence, error) {
	var seqs []model.Sequence
	for range n {
		s, err := p.m.NewSequence(len(p.c.InputIDs) + steps)
		if err != nil {
			closeAll(seqs)
			return nil, err
		}
		seqs = append(seqs, s)
	}
	return seqs, nil
}

func closeAll(seqs []model.Sequence) {
	for _, s := range seqs {
		s.Close()
	}
}

func (p *passBench) prompt(s model.Sequence) model.Input {
	return model.Input{Seq: s, IDs: p.c.InputIDs, Positions: p.pos, Images: []*model.Embeddings{p.emb}}
}

func (p *passBench) prefill(ctx context.Context, k int) (time.Duration, error) {
	return p.median(func() error { return p.prefillOnce(ctx, k) })
}

// prefillOnce prefills k new sequences in one pass and closes them.
func (p *passBench) prefillOnce(ctx context.Context, k int) error {
	seqs, err := p.sequences(k, 1)
	if err != nil {
		return err
	}
	defer closeAll(seqs)
	in := make([]model.Input, k)
	for i, s := range seqs {
		in[i] = p.prompt(s)
	}
	_, err = p.b.Forward(ctx, in)
	return err
}

// prefilled makes n sequences with room for steps decode tokens and prefills them, 8 a pass;
// toks are their first tokens.
func (p *passBench) prefilled(ctx context.Context, n, steps int) (seqs []model.Sequence, toks []int32, err error) {
	if seqs, err = p.sequences(n, steps); err != nil {
		return nil, nil, err
	}
	toks = make([]int32, n)
	for i := 0; i < n; i += 8 {
		var in []model.Input
		for _, s := range seqs[i:min(n, i+8)] {
			in = append(in, p.prompt(s))
		}
		out, err := p.b.Forward(ctx, in)
		if err != nil {
			closeAll(seqs)
			return nil, nil, err
		}
		for j, o := range out {
			toks[i+j] = o.Argmax
		}
	}
	return seqs, toks, nil
}

// step runs the decode step of every sequence at decode index i, its tokens replaced by the next.
func (p *passBench) step(ctx context.Context, seqs []model.Sequence, toks []int32, i int) error {
	at := int32(len(p.c.InputIDs) + i + p.pos.Delta)
	in := make([]model.Input, len(seqs))
	for j, s := range seqs {
		in[j] = model.DecodeInput(s, toks[j], at, false)
	}
	out, err := p.b.Forward(ctx, in)
	if err != nil {
		return err
	}
	for j, o := range out {
		toks[j] = o.Argmax
	}
	return nil
}

func (p *passBench) decode(ctx context.Context, n int) (time.Duration, error) {
	seqs, toks, err := p.prefilled(ctx, n, p.iters+2)
	if err != nil {
		return 0, err
	}
	defer closeAll(seqs)
	i := 0
	return p.median(func() error {
		i++
		return p.step(ctx, seqs, toks, i-1)
	})
}

// rounds runs scheduler-like rounds: a vision pass of k images, a prefill of q prompts and a
// decode step of d sequences, and prints each phase's median. With the tower on a lane, rounds
// follow whose tower runs beside the prefill (of the round before's images) and the decode step,
// as the scheduler's two loops run them.
func (p *passBench) rounds(ctx context.Context, k, q, d int) error {
	steps := p.iters + 2
	seqs, toks, err := p.prefilled(ctx, d, 2*steps)
	if err != nil {
		return err
	}
	defer closeAll(seqs)
	// prefill runs q new prompts on embs and closes them
	prefill := func(embs []*model.Embeddings) error {
		fresh, err := p.sequences(q, 1)
		if err != nil {
			return err
		}
		defer closeAll(fresh)
		in := make([]model.Input, q)
		for j, s := range fresh {
			in[j] = model.Input{Seq: s, IDs: p.c.InputIDs, Positions: p.pos, Images: []*model.Embeddings{embs[j%len(embs)]}}
		}
		_, err = p.b.Forward(ctx, in)
		return err
	}
	var tv, tp, td, tr []float64
	for i := range steps {
		t0 := time.Now()
		embs, err := p.encode(ctx, k)
		if err != nil {
			return err
		}
		t1 := time.Now()
		err = prefill(embs)
		release(embs)
		if err != nil {
			return err
		}
		t2 := time.Now()
		if err := p.step(ctx, seqs, toks, i); err != nil {
			return err
		}
		if i >= 2 {
			tv, tp, td = append(tv, float64(t1.Sub(t0))), append(tp, float64(t2.Sub(t1))), append(td, float64(time.Since(t2)))
			tr = append(tr, float64(time.Since(t0)))
		}
	}
	med := func(v []float64) float64 { return ms(time.Duration(speed.Percentile(v, 50))) }
	fmt.Printf("round of %d images, %d prompts, %d decodes: vision %.3f ms, prefill %.3f ms, decode %.3f ms, the round %.3f ms (medians)\n",
		k, q, d, med(tv), med(tp), med(td), med(tr))
	if pe, ok := p.m.(model.ParallelEncoder); !ok || !pe.ParallelVision() {
		return nil
	}
	prev, err := p.encode(ctx, k)
	if err != nil {
		return err
	}
	defer func() { release(prev) }()
	var to []float64
	for i := range steps {
		t0 := time.Now()
		var next []*model.Embeddings
		var verr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			next, verr = p.encode(ctx, k)
		}()
		err := prefill(prev)
		if err == nil {
			err = p.step(ctx, seqs, toks, steps+i)
		}
		<-done
		release(prev)
		prev = next
		if err = cmp.Or(err, verr); err != nil {
			return err
		}
		if i >= 2 {
			to = append(to, float64(time.Since(t0)))
		}
	}
	fmt.Printf("round with the tower beside the prefill and decode (its lane): %.3f ms, against %.3f in turn (medians)\n", med(to), med(tr))
	return nil
}

// ints parses a flag's comma-separated list of positive sizes (empty: none).
func ints(flag, s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s %q: want positive whole numbers, comma-separated", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}
