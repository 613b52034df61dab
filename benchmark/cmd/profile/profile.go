// Package profile implements `iris profile`: it drives any OpenAI-compatible chat endpoint with
// one-image requests from an AIPerf single_turn file, writes AIPerf 0.13-compatible artifacts
// and a report, joins the server's OTLP spans by X-Request-ID, checks every answer against the
// Iris runtime in-process, and fingerprints what the run depends on before and after it.
// `iris profile report DIR` renders the same report from an artifact directory written by
// Iris or by AIPerf.
package profile

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"
)

const usage = `usage:
  iris profile --url URL --model NAME --input FILE.jsonl [flags]   profile a server
  iris profile report DIR [--bundle DIR]                          report an artifact directory (Iris's or AIPerf's)

Run "iris profile -h" or "iris profile report -h" for the flags.
`

// Run executes `iris profile ...` with args (after "profile").
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "report":
			return runReport(ctx, args[1:], stdout, stderr, defaultNative)
		case "help":
			fmt.Fprint(stdout, usage)
			return nil
		}
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return profileRun(ctx, o, stdout, stderr, defaultNative)
}

// options are the flags of a profiling run.
type options struct {
	url, model, input, out, name  string
	concurrency, warmup, requests int
	maxTokens                     int
	temperature, topP             optFloat
	topK                          optInt
	seed                          optInt
	ignoreEOS, streaming          bool
	timeout                       time.Duration
	otlpListen                    string
	otlpWait                      time.Duration
	bundle                        string
	tokenizer, tokenizerRevision  string
	source                        string
	args                          []string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("iris profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{args: args}
	fs.StringVar(&o.url, "url", "", "server base URL (http://host:port; /v1/chat/completions is appended)")
	fs.StringVar(&o.model, "model", "", "model name sent in every request")
	fs.StringVar(&o.input, "input", "", "input file: AIPerf single_turn JSONL, one text and one data-URI image per row")
	fs.StringVar(&o.out, "out", "", "artifact directory (default artifacts/<model>-iris-chat-concurrency<N>); must be new or empty")
	fs.StringVar(&o.name, "name", "", "profile name in the report table (default: the model)")
	fs.IntVar(&o.concurrency, "concurrency", 1, "requests in flight at once (closed loop)")
	fs.IntVar(&o.warmup, "warmup", 2, "warmup requests, sent first and excluded from statistics")
	fs.IntVar(&o.requests, "requests", 10, "measured requests; rows are used in file order and wrap around")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "max_completion_tokens for every row (default: each row's output_length, else the model's default)")
	fs.Var(&o.temperature, "temperature", "sampling temperature (default: the model's)")
	fs.Var(&o.topK, "top-k", "top_k (default: the model's)")
	fs.Var(&o.topP, "top-p", "top_p (default: the model's)")
	fs.Var(&o.seed, "seed", "sampling seed sent with every request (default: none)")
	fs.BoolVar(&o.ignoreEOS, "ignore-eos", false, "send ignore_eos: generate until the token limit")
	fs.BoolVar(&o.streaming, "streaming", false, "stream answers (adds TTFT, TPOT and inter-chunk latency)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on one request")
	fs.StringVar(&o.otlpListen, "otlp-listen", "", "run an OTLP/HTTP trace receiver on host:port (e.g. 127.0.0.1:4318) and join the server's spans")
	fs.DurationVar(&o.otlpWait, "otlp-wait", 15*time.Second, "how long to wait after the run for the server's spans")
	fs.StringVar(&o.bundle, "bundle", "", "bundle directory: answer every input natively in-process and require equal answers; fingerprinted")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer the results depend on: a local directory (fingerprinted) or a hub id pinned with --tokenizer-revision")
	fs.StringVar(&o.tokenizerRevision, "tokenizer-revision", "", "40-hex commit of a hub --tokenizer")
	fs.StringVar(&o.source, "source", ".", `a directory in the git work tree to fingerprint ("" skips)`)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("profile: unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.url == "":
		return nil, errors.New("profile: --url is required")
	case o.model == "":
		return nil, errors.New("profile: --model is required")
	case o.input == "":
		return nil, errors.New("profile: --input is required")
	case o.concurrency < 1 || o.requests < 1 || o.warmup < 0 || o.maxTokens < 0:
		return nil, errors.New("profile: --concurrency and --requests must be >= 1, --warmup and --max-tokens >= 0")
	}
	if o.out == "" {
		o.out = fmt.Sprintf("artifacts/%s-iris-chat-concurrency%d", sanitize(o.model), o.concurrency)
	}
	if o.name == "" {
		o.name = o.model
	}
	return o, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '/' || c == '\\' || c == ' ' || c == ':' {
			b[i] = '_'
		}
	}
	return string(b)
}

// optFloat is a float flag that remembers whether it was set.
type optFloat struct{ v *float64 }

func (f *optFloat) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	f.v = &v
	return nil
}

// optInt is an integer flag that remembers whether it was set.
type optInt struct{ v *int64 }

func (f *optInt) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f *optInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return err
	}
	f.v = &v
	return nil
}

// version names this build for the artifacts.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

// isTerminal reports whether w is a character device, where a progress bar may redraw itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
