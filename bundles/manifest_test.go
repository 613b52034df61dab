package bundles

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var invalidCases = []struct {
	file, wantErr string
}{
	{"unknown_key", `unknown key "plugin.max_memry_pages"`},
	{"unknown_top", `unknown key "famliy"`},
	{"bad_schema", "schema: got 2"},
	{"no_name", "name:"},
	{"slash_name", "name:"},
	{"no_tasks", "tasks: at least one"},
	{"unknown_task", `unknown task "image-chat"`},
	{"dup_task", "declared twice"},
	{"bad_backend", `engine.backend: "tpu"`},
	{"bad_precision", `engine.precision: "int3"`},
	{"small_context", "engine.context_length: 8"},
	{"max_new_over_ctx", "generation.max_new_tokens: 4096"},
	{"neg_temp", "temperature >= 0"},
	{"bad_top_p", "0 < top_p <= 1"},
	{"no_stop", "generation.stop_ids"},
	{"no_plugin", "plugin.file"},
	{"zero_pages", "plugin.max_memory_pages: 0"},
	{"abs_path", `"/etc/passwd" must be a clean relative path`},
	{"dotdot_path", `"../outside.safetensors" must be a clean relative path`},
	{"bad_sha", "sha256 must be 64 lowercase hex digits"},
	{"dup_path", `"config.json" listed twice`},
	{"no_tokenizer", "tokenizer.json is required"},
	{"config_unlisted", "engine.config: must name a file listed in model"},
	{"wrong_type", "context_length"},
	{"zero_aspect", "max_aspect >= 1"},
	{"syntax", "decode manifest"},
	{"budget_bounds", "image.budgets.bounds"},
	{"budget_outside", "image.budgets.low"},
}

func TestDecodeManifestInvalid(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.toml")
	if len(files) != len(invalidCases) {
		t.Fatalf("%d files in testdata/invalid, %d cases: keep them in step", len(files), len(invalidCases))
	}
	for _, tt := range invalidCases {
		t.Run(tt.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "invalid", tt.file+".toml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeManifest(bytes.NewReader(src))
			if err == nil {
				t.Fatalf("decoded without error, want %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodeManifestValidRoundTrip(t *testing.T) {
	src, err := os.ReadFile("testdata/valid.toml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeManifest(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if m.Primary() != TaskVisionLanguage || m.HasTask(TaskText) {
		t.Fatalf("tasks = %v", m.Tasks)
	}
	if b := m.Image.Budgets; b == nil || b.Low != [2]int64{3136, 200704} || b.Bounds[1] != 12845056 {
		t.Fatalf("image.budgets = %+v", b)
	}
	if got := m.Plugin.Params["max_pixels"]; got != int64(12845056) {
		t.Fatalf("plugin.params.max_pixels = %#v", got)
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	m2, err := DecodeManifest(&buf)
	if err != nil {
		t.Fatalf("re-decode: %v\n%s", err, buf.String())
	}
	if m2.Name != m.Name || len(m2.Files()) != len(m.Files()) || m2.Engine != m.Engine || !reflect.DeepEqual(m2.Image, m.Image) {
		t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
	}
}

func TestValidateErrorsWrapErrInvalid(t *testing.T) {
	src, err := os.ReadFile("testdata/invalid/bad_backend.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = DecodeManifest(bytes.NewReader(src))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not wrap ErrInvalid", err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	src, err := os.ReadFile("testdata/valid.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(src))
	for _, tt := range invalidCases {
		src, err := os.ReadFile(filepath.Join("testdata", "invalid", tt.file+".toml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := DecodeManifest(strings.NewReader(src))
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest fails Validate: %v", err)
		}
		for _, f := range m.Files() {
			if checkPath(f.Path) != nil || strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") && filepath.Clean(f.Path) != f.Path {
				t.Fatalf("unsafe path accepted: %q", f.Path)
			}
		}
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatalf("valid manifest does not encode: %v", err)
		}
		if _, err := DecodeManifest(&buf); err != nil {
			t.Fatalf("encoded manifest does not decode: %v\n%s", err, buf.String())
		}
	})
}

// validManifest decodes testdata/valid.toml afresh.
func validManifest(t *testing.T) *Manifest {
	t.Helper()
	src, err := os.ReadFile("testdata/valid.toml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeManifest(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// validateCases break one field of testdata/valid.toml each; want is a fragment of the message of
// the check that must refuse it.
var validateCases = []struct {
	name string
	edit func(*Manifest)
	want string
}{
	{"schema", func(m *Manifest) { m.Schema = 2 }, "schema: got 2, this build reads 1"},
	{"name empty", func(m *Manifest) { m.Name = "" }, "name: must be 1-128 characters"},
	{"name with a space", func(m *Manifest) { m.Name = "tiny model" }, "name: must be 1-128 characters"},
	{"name too long", func(m *Manifest) { m.Name = strings.Repeat("n", 129) }, "name: must be 1-128 characters"},
	{"family empty", func(m *Manifest) { m.Family = "" }, "family: required"},
	{"no tasks", func(m *Manifest) { m.Tasks = nil }, "tasks: at least one task"},
	{"unknown task", func(m *Manifest) { m.Tasks = append(m.Tasks, "image-chat") }, `tasks: unknown task "image-chat"`},
	{"task twice", func(m *Manifest) { m.Tasks = append(m.Tasks, m.Tasks[0]) }, `tasks: "vision-language-generation" declared twice`},
	{"backend", func(m *Manifest) { m.Engine.Backend = "tpu" }, `engine.backend: "tpu" is not cpu or cuda`},
	{"precision", func(m *Manifest) { m.Engine.Precision = "int3" }, `engine.precision: "int3" is not fp32 or bf16`},
	{"context too short", func(m *Manifest) { m.Engine.ContextLength = 15 }, "engine.context_length: 15 is outside"},
	{"context too long", func(m *Manifest) { m.Engine.ContextLength = 1<<20 + 1 }, "engine.context_length: 1048577 is outside"},
	{"image max bytes", func(m *Manifest) { m.Image.MaxBytes = 0 }, "image: max_bytes, max_pixels, min_side must be positive"},
	{"image max pixels", func(m *Manifest) { m.Image.MaxPixels = -1 }, "image: max_bytes, max_pixels, min_side must be positive"},
	{"image min side", func(m *Manifest) { m.Image.MinSide = 0 }, "image: max_bytes, max_pixels, min_side must be positive"},
	{"image max aspect", func(m *Manifest) { m.Image.MaxAspect = 0.5 }, "max_aspect >= 1"},
	{"budget bounds zero", func(m *Manifest) { m.Image.Budgets.Bounds[0] = 0 }, "image.budgets.bounds: want 1 <= min <= max, got [0 12845056]"},
	{"budget bounds reversed", func(m *Manifest) { m.Image.Budgets.Bounds = [2]int64{4, 3} }, "image.budgets.bounds: want 1 <= min <= max, got [4 3]"},
	{"budget low reversed", func(m *Manifest) { m.Image.Budgets.Low = [2]int64{200704, 3136} }, "image.budgets.low: [200704 3136] must be a [min, max] range inside bounds"},
	{"budget low under bounds", func(m *Manifest) { m.Image.Budgets.Low[0] = 3000 }, "image.budgets.low: [3000 200704]"},
	{"budget high over bounds", func(m *Manifest) { m.Image.Budgets.High[1]++ }, "image.budgets.high: [3136 12845057]"},
	{"max new tokens zero", func(m *Manifest) { m.Generation.MaxNewTokens = 0 }, "generation.max_new_tokens: 0 must be in [1, context_length)"},
	{"max new tokens the context", func(m *Manifest) { m.Generation.MaxNewTokens = 4096 }, "generation.max_new_tokens: 4096"},
	{"temperature", func(m *Manifest) { m.Generation.Temperature = -0.5 }, "generation: temperature >= 0, top_k >= 0 and 0 < top_p <= 1 required"},
	{"top k", func(m *Manifest) { m.Generation.TopK = -1 }, "generation: temperature >= 0, top_k >= 0"},
	{"top p zero", func(m *Manifest) { m.Generation.TopP = 0 }, "generation: temperature >= 0, top_k >= 0"},
	{"top p over one", func(m *Manifest) { m.Generation.TopP = 1.5 }, "generation: temperature >= 0, top_k >= 0"},
	{"no stop ids", func(m *Manifest) { m.Generation.StopIDs = nil }, "generation.stop_ids: at least one stop id"},
	{"no plugin", func(m *Manifest) { m.Plugin.File = "" }, "plugin.file: a vision-language bundle needs a family plugin"},
	{"plugin abi", func(m *Manifest) { m.Plugin.ABI = 0 }, "plugin.abi: required"},
	{"plugin pages zero", func(m *Manifest) { m.Plugin.MaxMemoryPages = 0 }, "plugin.max_memory_pages: 0 is outside [1, 65536]"},
	{"plugin pages over 4 GiB", func(m *Manifest) { m.Plugin.MaxMemoryPages = 65537 }, "plugin.max_memory_pages: 65537 is outside"},
	{"image read unknown", func(m *Manifest) { m.Image.Read = "cv2" }, `image.read: "cv2" is not`},
	{"grounding first negative", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.CoordFirst = -1 }) },
		"generation.grounding: coordinate ids [-1, 1000]"},
	{"grounding last before first", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.CoordLast = 9 }) },
		"generation.grounding: coordinate ids [10, 9]"},
	{"grounding scale zero", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.Scale = 0 }) },
		"and scale 0: want"},
	{"grounding scale infinite", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.Scale = math.Inf(1) }) },
		"and scale +Inf: want"},
	{"grounding id negative", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.RefClose = -1 }) },
		"box and ref ids [1001 1002 1003 -1] must be"},
	{"grounding id a coordinate", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.BoxOpen = 500 }) },
		"box and ref ids [500 1002 1003 1004] must be"},
	{"grounding ids repeated", func(m *Manifest) { m.Generation.Grounding = grounding(func(g *Grounding) { g.RefOpen = 1002 }) },
		"box and ref ids [1001 1002 1002 1004] must be"},
	{"plugin timeout zero", func(m *Manifest) { m.Plugin.TimeoutMS = 0 }, "plugin.timeout_ms: 0 is outside [1, 60000]"},
	{"plugin timeout over a minute", func(m *Manifest) { m.Plugin.TimeoutMS = 60001 }, "plugin.timeout_ms: 60001 is outside"},
	{"no tokenizer files", func(m *Manifest) { m.Tokenizer.Files = nil }, "tokenizer.files: tokenizer.json is required"},
	{"no tokenizer.json", func(m *Manifest) { m.Tokenizer.Files[0].Path = "vocab.json" }, "tokenizer.files: tokenizer.json is required"},
	{"no weights", func(m *Manifest) { m.Weights = nil }, "weights: at least one weight file"},
	{"config empty", func(m *Manifest) { m.Engine.Config = "" }, "engine.config: must name a file listed in model"},
	{"config unlisted", func(m *Manifest) { m.Engine.Config = "other.json" }, "engine.config: must name a file listed in model"},
	{"path empty", func(m *Manifest) { m.Weights[0].Path = "" }, "weights: empty path"},
	{"path absolute", func(m *Manifest) { m.Weights[0].Path = "/w.safetensors" }, `weights: path "/w.safetensors" must be a clean relative path`},
	{"path with a backslash", func(m *Manifest) { m.Weights[0].Path = `w\x.safetensors` }, `must be a clean relative path`},
	{"path not clean", func(m *Manifest) { m.Weights[0].Path = "a/../w.safetensors" }, `weights: path "a/../w.safetensors" must be a clean`},
	{"path dot", func(m *Manifest) { m.Weights[0].Path = "." }, `weights: path "." must be a clean`},
	{"path dot dot", func(m *Manifest) { m.Weights[0].Path = ".." }, `weights: path ".." must be a clean`},
	{"path above", func(m *Manifest) { m.Weights[0].Path = "../w.safetensors" }, `weights: path "../w.safetensors" must be a clean`},
	{"path the manifest", func(m *Manifest) { m.Weights[0].Path = ManifestName }, `weights: path "bundle.toml" must be a clean`},
	{"sha256 short", func(m *Manifest) { m.Weights[0].SHA256 = m.Weights[0].SHA256[1:] }, `weights: "model.safetensors": sha256 must be 64 lowercase hex digits`},
	{"sha256 upper case", func(m *Manifest) { m.Weights[0].SHA256 = strings.Repeat("A", 64) }, `weights: "model.safetensors": sha256 must be 64`},
	{"plugin sha256", func(m *Manifest) { m.Plugin.SHA256 = "" }, `plugin: "plugin.wasm": sha256 must be 64`},
	{"size negative", func(m *Manifest) { m.Model[0].Size = -1 }, `model: "config.json": negative size`},
	{"path twice", func(m *Manifest) { m.Weights = append(m.Weights, m.Weights[0]) }, `weights: "model.safetensors" listed twice`},
}

func TestValidateRefusals(t *testing.T) {
	if err := validManifest(t).Validate(); err != nil {
		t.Fatalf("valid.toml: %v", err)
	}
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			m := validManifest(t)
			tc.edit(m)
			err := m.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid containing %q", err, tc.want)
			}
			if err := m.Encode(io.Discard); err == nil || err.Error() != m.Validate().Error() {
				t.Fatalf("Encode of an invalid manifest: %v", err)
			}
		})
	}
	m := validManifest(t)
	m.Plugin.Params["bad"] = func() {}
	if err := m.Encode(io.Discard); err == nil || !strings.HasPrefix(err.Error(), "encode manifest:") {
		t.Fatalf("a param TOML cannot hold: %v", err)
	}
}

// grounding is a valid grounding section (coordinates 10..1000, marks 1001-1004) with one edit.
func grounding(edit func(*Grounding)) *Grounding {
	g := &Grounding{CoordFirst: 10, CoordLast: 1000, Scale: 1000, BoxOpen: 1001, BoxClose: 1002, RefOpen: 1003, RefClose: 1004}
	edit(g)
	return g
}
