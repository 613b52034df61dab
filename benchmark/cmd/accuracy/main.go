// Command accuracy asks a running Iris server (or any OpenAI-compatible server that honours
// vLLM's return_token_ids) every question of a scene set, greedily, and reports exact-match
// accuracy per question type and overall; given a reference run (e.g. transformers' or vLLM's
// answers to the same set), also how often the answer text equals the reference's and how far
// the generated token ids agree with it:
//
//	accuracy -model NAME -scenes DIR [-reference REF.jsonl] [-url http://127.0.0.1:8080]
//	         [-max-tokens 8] [-concurrency 4] [-json OUT.json]
//	         [-min-accuracy 0.95] [-require-reference] [-min-answer-agreement F] [-min-token-agreement F]
//
// DIR/scenes.jsonl holds one item a line: image (a PNG file in DIR), question, answer, type and
// index. REF.jsonl holds one row per item: index, question (the join key), got (the answer
// text) and tokens (the generated ids, the final stop token included when one was generated).
// The answer is the message content, compared exactly (no trimming), with answer and with got.
// Token agreement is the summed common prefix of the server's and the reference's ids over the
// reference's summed ids.
//
// Exit status: 0, 1 when a gate fails (the reason on one line of stderr), 2 on a usage, input or
// output error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitGate  = 1
	exitUsage = 2
)

// progressEvery is how often a long run reports on stderr.
const progressEvery = 5 * time.Second

// options are the command's flags.
type options struct {
	url, model, scenes, reference, jsonOut string
	maxTokens, concurrency                 int
	ignoreEOS                              bool
	gates                                  gates
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&o.model, "model", "", "model name (required)")
	fs.StringVar(&o.scenes, "scenes", "", "scene set directory: scenes.jsonl and its PNG images (required)")
	fs.StringVar(&o.reference, "reference", "", "reference run (JSONL: index, question, got, tokens) to compare with")
	fs.StringVar(&o.jsonOut, "json", "", "write the summary and every item's row as JSON here")
	fs.IntVar(&o.maxTokens, "max-tokens", 8, "max_tokens of each request")
	fs.BoolVar(&o.ignoreEOS, "ignore-eos", false, "send ignore_eos: every answer runs to -max-tokens (a reference whose EOS never stops)")
	fs.IntVar(&o.concurrency, "concurrency", 4, "requests in flight")
	fs.Float64Var(&o.gates.MinAccuracy, "min-accuracy", 0, "fail (exit 1) below this overall accuracy (0: off)")
	fs.BoolVar(&o.gates.RequireReference, "require-reference", false, "fail (exit 1) unless every answer equals the reference's")
	fs.Float64Var(&o.gates.MinAnswerAgreement, "min-answer-agreement", 0, "fail (exit 1) below this fraction of answers equal to the reference's (0: off)")
	fs.Float64Var(&o.gates.MinTokenAgreement, "min-token-agreement", 0, "fail (exit 1) below this token agreement with the reference (0: off)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.model == "":
		return nil, errors.New("-model is required")
	case o.scenes == "":
		return nil, errors.New("-scenes is required")
	case o.maxTokens < 1 || o.concurrency < 1:
		return nil, errors.New("-max-tokens and -concurrency must be at least 1")
	case o.reference == "" && o.gates.needReference():
		return nil, errors.New("-require-reference, -min-answer-agreement and -min-token-agreement need -reference")
	}
	for _, f := range []float64{o.gates.MinAccuracy, o.gates.MinAnswerAgreement, o.gates.MinTokenAgreement} {
		if f < 0 || f > 1 {
			return nil, errors.New("the -min-* gates are fractions in [0, 1]")
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "accuracy:", err)
		return exitUsage
	}
	items, images, err := load(o)
	if err != nil {
		fmt.Fprintln(stderr, "accuracy:", err)
		return exitUsage
	}
	c := newClient(o.url, o.model, o.maxTokens)
	c.ignoreEOS = o.ignoreEOS
	start := time.Now()
	askAll(ctx, c, items, images, o.concurrency, func(done int) {
		fmt.Fprintf(stderr, "accuracy: %d/%d done, %.0fs\n", done, len(items), time.Since(start).Seconds())
	})
	if err := ctx.Err(); err != nil {
		fmt.Fprintln(stderr, "accuracy: interrupted:", err)
		return exitUsage
	}
	s := summarize(items, o.reference != "")
	failed := o.gates.check(s)
	writeReport(stdout, s, items)
	if o.jsonOut != "" {
		if err := writeJSON(o.jsonOut, o, s, items, failed); err != nil {
			fmt.Fprintln(stderr, "accuracy:", err)
			return exitUsage
		}
	}
	if failed != "" {
		fmt.Fprintln(stderr, "accuracy: gate failed:", failed)
		return exitGate
	}
	return exitOK
}

// load reads the scene set, joins the reference when there is one and reads every image once,
// as a data URL by file name.
func load(o *options) ([]*item, map[string]string, error) {
	scenes, err := readScenes(filepath.Join(o.scenes, "scenes.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	var refs []refRow
	if o.reference != "" {
		if refs, err = readReference(o.reference); err != nil {
			return nil, nil, err
		}
	}
	items, err := join(scenes, refs, o.reference != "")
	if err != nil {
		return nil, nil, fmt.Errorf("joining %s with the scenes: %w", o.reference, err)
	}
	images := map[string]string{}
	for _, sc := range scenes {
		if _, ok := images[sc.Image]; ok {
			continue
		}
		if images[sc.Image], err = readImage(filepath.Join(o.scenes, sc.Image)); err != nil {
			return nil, nil, err
		}
	}
	return items, images, nil
}

// askAll asks every item's question, concurrency at a time, filling in each item's answer;
// progress is called with the items done every progressEvery.
func askAll(ctx context.Context, c *client, items []*item, images map[string]string, concurrency int, progress func(done int)) {
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
	)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				progress(int(done.Load()))
			}
		}
	}()
	for range min(concurrency, len(items)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(items) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				it := items[i]
				a, err := c.ask(ctx, it.Question, images[it.image])
				if err != nil {
					it.Error = err.Error()
				} else {
					it.Got, it.TokenIDs, it.FinishReason = a.content, a.tokenIDs, a.finishReason
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
}
