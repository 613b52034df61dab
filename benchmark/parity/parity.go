// Package parity checks that every answer an HTTP server gave equals the answer the Iris runtime
// gives in-process for the same request: the same body is parsed by the gateway's parser into
// the same core.Request, run natively, and matched to each HTTP record by the request's identity
// key (question, image digest and every resolved generation setting).
package parity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/openai"
)

// Runtime is what parity needs of *core.Runtime.
type Runtime interface {
	Resolve(model string, p core.Params) (core.Resolved, error)
	Generate(ctx context.Context, req core.Request, emit core.Emit) (*core.Result, error)
}

// Request turns a chat request body into the core.Request the gateway hands the runtime for it:
// parsed by openai.ParseChatRequest and mapped by openai.CoreRequest, the very functions the
// HTTP handler (gateway/server chat.go) calls.
func Request(body []byte) (core.Request, error) {
	r, err := openai.ParseChatRequest(body)
	if err != nil {
		return core.Request{}, fmt.Errorf("parse request body: %w", err)
	}
	if r.Image == nil || r.Image.Data == nil {
		return core.Request{}, errors.New("parse request body: native parity needs an inline (data: URL) image")
	}
	return openai.CoreRequest(r, r.Image.Data, "", ""), nil
}

// Key is a request's identity: core.Resolved.Key (question, image digest, max tokens,
// temperature, top_k, top_p, seed, ignore_eos) plus the order of the message's parts, which
// changes the prompt. imageSHA256 overrides the digest of req.Image when non-empty (the digest
// the server reported for what it received).
func Key(rt Runtime, req core.Request, imageSHA256 string) (string, error) {
	res, err := rt.Resolve(req.Model, req.Params)
	if err != nil {
		return "", fmt.Errorf("resolve settings: %w", err)
	}
	if imageSHA256 == "" {
		sum := sha256.Sum256(req.Image)
		imageSHA256 = hex.EncodeToString(sum[:])
	}
	return fmt.Sprintf("%s|text_first=%t", res.Key(req.Text, imageSHA256), req.TextFirst), nil
}

// Native is the runtime's answer to one request.
type Native struct {
	Key              string
	Text             string
	CompletionTokens int
	FinishReason     string
}

// RunNative answers every distinct request among bodies in-process, in order, once per key.
func RunNative(ctx context.Context, rt Runtime, bodies [][]byte) (map[string]Native, error) {
	out := map[string]Native{}
	for i, body := range bodies {
		req, err := Request(body)
		if err != nil {
			return nil, fmt.Errorf("native request %d: %w", i, err)
		}
		key, err := Key(rt, req, "")
		if err != nil {
			return nil, fmt.Errorf("native request %d: %w", i, err)
		}
		if _, done := out[key]; done {
			continue
		}
		req.ID = fmt.Sprintf("parity-%d", i)
		res, err := rt.Generate(ctx, req, nil)
		if err != nil {
			return nil, fmt.Errorf("native request %d: %w", i, err)
		}
		out[key] = Native{Key: key, Text: res.Text, CompletionTokens: res.Usage.CompletionTokens, FinishReason: string(res.FinishReason)}
	}
	return out, nil
}

// Observed is one HTTP record to check.
type Observed struct {
	RequestID string
	Phase     string
	// Body is the request body as sent.
	Body []byte
	// ImageSHA256 is the digest the server reported for the image it received; empty when the
	// server does not report one.
	ImageSHA256 string
	Text        string
	// CompletionTokens is usage.completion_tokens, or -1 when the response had no usage.
	CompletionTokens int
	// Failed marks a request that got no answer.
	Failed bool
}

// Outcome is the verdict on one record.
type Outcome string

// Outcomes.
const (
	Match     Outcome = "match"
	Mismatch  Outcome = "mismatch"
	Unmatched Outcome = "unmatched"
	Failed    Outcome = "failed"
)

// Verdict is the check of one record.
type Verdict struct {
	RequestID string  `json:"x_request_id"`
	Phase     string  `json:"benchmark_phase"`
	Key       string  `json:"key,omitempty"`
	Outcome   Outcome `json:"outcome"`
	Detail    string  `json:"detail,omitempty"`
	HTTPText  string  `json:"http_text"`
	HTTPTok   int     `json:"http_completion_tokens"`
	// NativeText and NativeTok are the native answer, when one matched.
	NativeText string `json:"native_text,omitempty"`
	NativeTok  int    `json:"native_completion_tokens,omitempty"`
}

// Report is the check of a whole run.
type Report struct {
	Verdicts []Verdict       `json:"verdicts"`
	Counts   map[Outcome]int `json:"counts"`
	// Inputs counts the distinct native requests.
	Inputs int `json:"native_inputs"`
}

// OK reports whether every record matched its native answer.
func (r Report) OK() bool {
	for o, n := range r.Counts {
		if o != Match && n > 0 {
			return false
		}
	}
	return r.Counts[Match] > 0
}

// Check matches each observed record to the native answer with the same identity key and
// compares the answer text and the completion token count.
func Check(rt Runtime, native map[string]Native, obs []Observed) Report {
	rep := Report{Counts: map[Outcome]int{}, Inputs: len(native)}
	for _, o := range obs {
		v := Verdict{RequestID: o.RequestID, Phase: o.Phase, HTTPText: o.Text, HTTPTok: o.CompletionTokens}
		switch req, err := Request(o.Body); {
		case o.Failed:
			v.Outcome, v.Detail = Failed, "the request failed"
		case err != nil:
			v.Outcome, v.Detail = Unmatched, err.Error()
		default:
			key, err := Key(rt, req, o.ImageSHA256)
			if err != nil {
				v.Outcome, v.Detail = Unmatched, err.Error()
				break
			}
			v.Key = key
			n, ok := native[key]
			if !ok {
				v.Outcome, v.Detail = Unmatched, "no native answer has this identity"
				break
			}
			v.NativeText, v.NativeTok = n.Text, n.CompletionTokens
			switch {
			case n.Text != o.Text:
				v.Outcome, v.Detail = Mismatch, fmt.Sprintf("answer %q, native %q", o.Text, n.Text)
			case n.CompletionTokens != o.CompletionTokens:
				v.Outcome, v.Detail = Mismatch, fmt.Sprintf("completion_tokens %d, native %d", o.CompletionTokens, n.CompletionTokens)
			default:
				v.Outcome = Match
			}
		}
		rep.Counts[v.Outcome]++
		rep.Verdicts = append(rep.Verdicts, v)
	}
	return rep
}

// Failures lists the verdicts that are not matches.
func (r Report) Failures() []Verdict {
	return slices.DeleteFunc(slices.Clone(r.Verdicts), func(v Verdict) bool { return v.Outcome == Match })
}
