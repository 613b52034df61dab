// Package coretest gives tests outside core the committed engine fixtures as real bundles: a
// tiny random-weight Qwen2.5-VL checkpoint with the family plugin compiled from source, and the
// transformers reference outputs for each case. Test code only.
package coretest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/tokenize"
)

// Models are the fixture checkpoints: untied and tied embeddings.
var Models = []string{"tiny-untied", "tiny-tied"}

// Bundle builds a bundle named model from a fixture checkpoint into a temporary directory.
func Bundle(tb testing.TB, model string, contextLength int) string {
	tb.Helper()
	wasm := plugintest.BuildFamily(tb, "qwen2_5_vl")
	pluginFile := filepath.Join(tb.TempDir(), "qwen2_5_vl.wasm")
	if err := os.WriteFile(pluginFile, wasm, 0o644); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), model)
	if _, err := bundles.Build(tb.Context(), bundles.BuildOptions{From: fixture.ModelDir(model), Family: "qwen2_5_vl", Out: out, Plugin: pluginFile, ContextLength: contextLength}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Case is one reference case: an image, a question and what transformers answered.
type Case struct {
	Name     string
	Image    []byte
	Question string
	// PromptTokens is the length of the reference prompt (image tokens included).
	PromptTokens int
	// Tokens is the greedy answer (EOS ignored) and Text its decoding without special tokens.
	Tokens []int32
	Text   string
}

// Cases returns the reference cases of a fixture model.
func Cases(tb testing.TB, model string) []Case {
	tb.Helper()
	golden, err := fixture.LoadGolden(model)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenize.Load(fixture.ModelDir(model))
	if err != nil {
		tb.Fatal(err)
	}
	defer tok.Close()
	var out []Case
	for _, g := range golden.Cases {
		c, err := fixture.LoadCase(g.Case)
		if err != nil {
			tb.Fatal(err)
		}
		img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, Case{Name: g.Case, Image: img, Question: c.Question, PromptTokens: len(c.InputIDs), Tokens: g.Tokens, Text: tok.DecodeSkipSpecial(g.Tokens)})
	}
	return out
}
