package bundles

import (
	"bytes"
	"errors"
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
	src, _ := os.ReadFile("testdata/invalid/bad_backend.toml")
	_, err := DecodeManifest(bytes.NewReader(src))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not wrap ErrInvalid", err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	if src, err := os.ReadFile("testdata/valid.toml"); err == nil {
		f.Add(string(src))
	}
	for _, tt := range invalidCases {
		if src, err := os.ReadFile(filepath.Join("testdata", "invalid", tt.file+".toml")); err == nil {
			f.Add(string(src))
		}
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
