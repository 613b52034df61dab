// Package coretest gives tests outside core the engine fixtures as real bundles: tiny random-weight
// Qwen2.5-VL checkpoints and seeded Qwen3-VL, InternVL3, Phi-4-multimodal, LocateAnything,
// Lance and DeepSeek-OCR-2 ones (and LocateAnything ones constructed to answer with a box or a
// point), with the family plugin compiled from source, and the reference outputs for each case.
// Test code only.
package coretest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/tokenize"
)

// Qwen3 is the Qwen3-VL model: a checkpoint of its shape sweep regenerated from its seed
// (fixture.WriteServedModel), answered by transformers through its own processor.
const Qwen3 = "qwen3-seeded"

// InternVL is the InternVL3 model: a checkpoint of its shape sweep regenerated from its seed,
// served with up to two tiles and the thumbnail (several views a request, plugin ABI 2),
// answered by transformers through InternVLProcessor.
const InternVL = "internvl-seeded"

// Phi4 is the Phi-4-multimodal model: a checkpoint of its shape sweep regenerated from its seed,
// served with dynamic_hd 2 (the global view and one or two crops with their patch masks),
// answered by transformers through Phi4MultimodalProcessor.
const Phi4 = "phi4-seeded"

// LocateAnything is the LocateAnything-3B model: a checkpoint of its shape sweep regenerated from
// its seed, served as a bundle of family locateanything (its grounding ids in bundle.toml),
// answered by the official remote code through its own processor in the slow mode.
const LocateAnything = "locateanything-seeded"

// Lance is the Lance model: a checkpoint of its shape sweep regenerated from its seed, answered
// by Lance's official code (scripts/reference/golden_lance.py served) from the image file on.
const Lance = "lance-seeded"

// LanceRelease is the same Lance model written in Lance's release layout (Lance_3B/ with the
// generation expert's tensors, Qwen2.5-VL-ViT/; fixture.WriteLanceRelease) and bundled from it.
const LanceRelease = "lance-release"

// LocateAnythingBox and LocateAnythingPoint are LocateAnything models whose answers carry a
// labelled box and a labelled point: the seeded checkpoint of LocateAnything with its weights
// constructed (fixture.Construction; random weights never emit grounding tokens) so that greedy
// decoding spells a chosen answer whatever the image, answered by the official remote code on
// images of several sizes, with its evaluation parser's boxes in the original image's pixels
// (testdata/locateanything/grounded_{box,point}.json, scripts/reference/golden_grounded_locateanything.py).
const (
	LocateAnythingBox   = "locateanything-box"
	LocateAnythingPoint = "locateanything-point"
)

// DeepseekOCR2 is the DeepSeek-OCR-2 model: a checkpoint of its family's parity sweep regenerated
// from its seeds, answered by transformers through DeepseekOcr2Processor (no chat roles: BOS,
// the image, "\n" and the question).
const DeepseekOCR2 = "deepseek-ocr2-seeded"

// served maps the seeded models to their family.
var served = map[string]string{
	Qwen3: "qwen3_vl", InternVL: "internvl", LocateAnything: "locateanything", Lance: "lance", LanceRelease: "lance",
	LocateAnythingBox: "locateanything", LocateAnythingPoint: "locateanything",
	Phi4: "phi4_multimodal", Phi4Hub: "phi4_multimodal", Phi4Adapter: "phi4_multimodal",
	DeepseekOCR2: "deepseek_ocr2",
}

// goldens names a seeded model's served golden under testdata/<family> where it is not
// served.json.
var goldens = map[string]string{LocateAnythingBox: "grounded_box.json", LocateAnythingPoint: "grounded_point.json"}

// goldenOf is a seeded model's served golden file.
func goldenOf(model string) string {
	if g, ok := goldens[model]; ok {
		return g
	}
	return "served.json"
}

// Models are the fixture checkpoints: Qwen2.5-VL with untied and tied embeddings, Qwen3-VL,
// InternVL3, Phi-4-multimodal (in the transformers layout, with its vision LoRA as an adapter
// beside it, and in the hub's remote-code layout), LocateAnything (seeded, and constructed to
// ground), Lance (from Iris's layout and from the release's) and DeepSeek-OCR-2.
var Models = []string{
	"tiny-untied", "tiny-tied", Qwen3, InternVL, Phi4, Phi4Adapter, Phi4Hub,
	LocateAnything, LocateAnythingBox, LocateAnythingPoint, Lance, LanceRelease, DeepseekOCR2,
}

// Bundle builds a bundle named model from a fixture checkpoint into a temporary directory.
func Bundle(tb testing.TB, model string, contextLength int) string {
	tb.Helper()
	family, from := "qwen2_5_vl", fixture.ModelDir(model)
	if f, ok := served[model]; ok {
		family, from = f, tb.TempDir()
		write := func() error { _, err := fixture.WriteServedModelFrom(from, family, goldenOf(model)); return err }
		if model == LanceRelease {
			write = func() error { return fixture.WriteLanceRelease(from) }
		}
		if err := write(); err != nil {
			tb.Fatal(err)
		}
		if relayout := map[string]func(src, dst string) error{Phi4Hub: writePhi4Hub, Phi4Adapter: writePhi4Adapter}[model]; relayout != nil {
			layout := tb.TempDir()
			if err := relayout(from, layout); err != nil {
				tb.Fatal(err)
			}
			from = layout
		}
	}
	wasm := plugintest.BuildFamily(tb, family)
	pluginFile := filepath.Join(tb.TempDir(), family+".wasm")
	if err := os.WriteFile(pluginFile, wasm, 0o644); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), model)
	if _, err := bundles.Build(tb.Context(), bundles.BuildOptions{From: from, Family: family, Out: out, Plugin: pluginFile, ContextLength: contextLength}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Case is one reference case: an image, a question and what transformers answered.
type Case struct {
	Name     string
	Image    []byte
	Question string
	// PromptTokens is the length of the reference prompt (image tokens included); PromptIDs the
	// prompt itself, nil where the golden holds only its length (the seeded models').
	PromptTokens int
	PromptIDs    []int32
	// Tokens is the greedy answer (EOS ignored) and Text its decoding without special tokens.
	Tokens []int32
	Text   string
	// Boxes are what a grounding model's answer names (the reference's parser); nil for a model
	// that does not ground.
	Boxes []Box
}

// Box is a box or point of a reference answer, in the image's pixels.
type Box = fixture.ServedBox

// Cases returns the reference cases of a fixture model.
func Cases(tb testing.TB, model string) []Case {
	tb.Helper()
	if family, ok := served[model]; ok {
		return servedCases(tb, family, goldenOf(model))
	}
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
		out = append(out, Case{Name: g.Case, Image: img, Question: c.Question, PromptTokens: len(c.InputIDs), PromptIDs: c.InputIDs, Tokens: g.Tokens, Text: tok.DecodeSkipSpecial(g.Tokens)})
	}
	return out
}

func servedCases(tb testing.TB, family, golden string) []Case {
	s, err := fixture.LoadServedFile(family, golden)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenize.Load(tokenizerDir(family))
	if err != nil {
		tb.Fatal(err)
	}
	defer tok.Close()
	var out []Case
	for _, c := range s.Cases {
		img, err := os.ReadFile(c.ImagePath())
		if err != nil {
			tb.Fatal(err)
		}
		text := tok.DecodeSkipSpecial(c.Tokens)
		if family == "deepseek_ocr2" { // its plugin keeps special tokens, as upstream's runs decode
			text = tok.Decode(c.Tokens)
		}
		out = append(out, Case{Name: c.Name, Image: img, Question: c.Question, PromptTokens: c.PromptTokens, Tokens: c.Tokens,
			Text: text, Boxes: c.Boxes})
	}
	return out
}

// tokenizerDir is where a family's fixture tokenizer is.
func tokenizerDir(family string) string {
	switch family {
	case "internvl":
		return fixture.TokenizerDir("internvl3")
	case "phi4_multimodal":
		return fixture.TokenizerDir("phi4")
	case "locateanything":
		return fixture.TokenizerDir("locateanything")
	case "deepseek_ocr2":
		return fixture.TokenizerDir("deepseek_ocr2")
	}
	return fixture.ModelDir("tiny-untied") // the same Qwen tokenizer for Qwen2.5-VL and Qwen3-VL
}

// Decode is ids as the model's tokenizer decodes an answer: special tokens skipped.
func Decode(tb testing.TB, model string, ids []int32) string {
	tb.Helper()
	dir := fixture.ModelDir(model)
	if family, ok := served[model]; ok {
		dir = tokenizerDir(family)
	}
	tok, err := tokenize.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer tok.Close()
	if served[model] == "deepseek_ocr2" { // its plugin keeps special tokens
		return tok.Decode(ids)
	}
	return tok.DecodeSkipSpecial(ids)
}

// LanceReadCases are the Lance served golden's images that Lance's loader reads otherwise than
// transformers' load_image (an RGBA PNG, a JPEG with EXIF orientation 6) and a palette PNG, with
// the official code's answers on the Lance model (golden_lance.py served, read_cases). Name is
// the file's name.
func LanceReadCases(tb testing.TB) []Case {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(fixture.Root(), "lance", "served.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var golden struct {
		ReadCases []struct {
			Name, Image, Question string
			PromptTokens          int     `json:"prompt_tokens"`
			Tokens                []int32 `json:"tokens"`
		} `json:"read_cases"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		tb.Fatal(err)
	}
	root, err := plugintest.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenize.Load(tokenizerDir("lance"))
	if err != nil {
		tb.Fatal(err)
	}
	defer tok.Close()
	var out []Case
	for _, c := range golden.ReadCases {
		img, err := os.ReadFile(filepath.Join(root, c.Image))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, Case{Name: c.Name, Image: img, Question: c.Question, PromptTokens: c.PromptTokens, Tokens: c.Tokens, Text: tok.DecodeSkipSpecial(c.Tokens)})
	}
	return out
}
