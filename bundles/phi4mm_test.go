package bundles

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hubTensor is a tensor of a synthetic remote-code checkpoint: values v(i) = sin(seed + 0.37 i).
type hubTensor struct {
	name  string
	dtype string
	shape []int
	seed  float64
}

func (h hubTensor) values() []float32 {
	n := 1
	for _, d := range h.shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(h.seed + 0.37*float64(i)))
	}
	if h.dtype == "BF16" { // values a bf16 file can hold
		b, _ := EncodeFloats("BF16", v)
		v, _ = decodeFloats("BF16", b)
	}
	return v
}

// writeHub writes a tiny phi4mm checkpoint: one decoder layer whose four products carry vision
// and speech LoRAs (rank 2), an image embedding under its hub names, an audio tensor, a
// tokenizer naming id 200010 <|endoftext10|>; cfg edits the config.
func writeHub(t *testing.T, dtype string, edit func(cfg map[string]any, ts []hubTensor) []hubTensor) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{
		"model_type": "phi4mm", "architectures": []any{"Phi4MMForCausalLM"}, "auto_map": map[string]any{"AutoConfig": "configuration_phi4mm.Phi4MMConfig"},
		"hidden_size": 8.0, "num_hidden_layers": 1.0, "num_attention_heads": 2.0, "num_key_value_heads": 1.0,
		"intermediate_size": 6.0, "vocab_size": 200064.0, "tie_word_embeddings": true, "partial_rotary_factor": 0.75,
		"embd_layer": map[string]any{
			"image_embd_layer": map[string]any{"crop_size": 448.0, "embedding_cls": "tune_image", "hd_transform_order": "sub_glb",
				"image_token_compression_cls": "avg_pool_2d", "projection_cls": "mlp", "use_hd_transform": true, "with_learnable_separator": true},
			"audio_embd_layer": map[string]any{"downsample_rate": 1.0},
		},
		"audio_processor": map[string]any{"config": map[string]any{"attention_dim": 1024.0}},
		"vision_lora":     map[string]any{"r": 2.0, "lora_alpha": 6.0, "layer": "layers.*((self_attn\\.(qkv_proj|o_proj))|(mlp\\.(gate_up|down)_proj))"},
		"speech_lora":     map[string]any{"r": 2.0, "lora_alpha": 4.0},
	}
	ts := []hubTensor{{"model.embed_tokens.weight", dtype, []int{5, 8}, 1}, {"model.norm.weight", dtype, []int{8}, 2}}
	for i, p := range []struct {
		name    string
		out, in int
	}{{"self_attn.qkv_proj", 16, 8}, {"self_attn.o_proj", 8, 8}, {"mlp.gate_up_proj", 12, 8}, {"mlp.down_proj", 8, 6}} {
		stem := "model.layers.0." + p.name
		s := float64(10 * (i + 1))
		ts = append(ts,
			hubTensor{stem + ".base_layer.weight", dtype, []int{p.out, p.in}, s},
			hubTensor{stem + ".lora_A.vision.weight", dtype, []int{2, p.in}, s + 1},
			hubTensor{stem + ".lora_B.vision.weight", dtype, []int{p.out, 2}, s + 2},
			hubTensor{stem + ".lora_A.speech.weight", dtype, []int{2, p.in}, s + 3},
			hubTensor{stem + ".lora_B.speech.weight", dtype, []int{p.out, 2}, s + 4})
	}
	ts = append(ts,
		hubTensor{phi4ImagePrefix + "glb_GN", dtype, []int{1, 1, 4}, 60},
		hubTensor{phi4ImagePrefix + "sub_GN", dtype, []int{1, 1, 1, 4}, 61},
		hubTensor{phi4ImagePrefix + "img_projection.0.weight", dtype, []int{8, 4}, 62},
		hubTensor{phi4ImagePrefix + "img_projection.0.bias", dtype, []int{8}, 63},
		hubTensor{phi4ImagePrefix + "img_projection.2.weight", dtype, []int{8, 8}, 64},
		hubTensor{phi4ImagePrefix + "img_processor.embeddings.patch_embedding.weight", dtype, []int{4, 3, 2, 2}, 65},
		hubTensor{"model.embed_tokens_extend.audio_embed.encoder.encoders.0.self_attn.linear_q.weight", dtype, []int{4, 4}, 66})
	if edit != nil {
		ts = edit(cfg, ts)
	}
	decl := make([]STensor, len(ts))
	for i, h := range ts {
		decl[i] = STensor{Name: h.name, DType: h.dtype, Shape: h.shape}
	}
	w, err := CreateSafetensors(filepath.Join(dir, "model-00001-of-00001.safetensors"), decl)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range ts {
		b, err := EncodeFloats(h.dtype, h.values())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(h.name, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tok := map[string]any{"added_tokens": []any{
		map[string]any{"id": 200010.0, "content": "<|endoftext10|>", "special": true},
		map[string]any{"id": 200020.0, "content": "<|end|>", "special": true},
	}}
	for name, doc := range map[string]any{"config.json": cfg, "tokenizer.json": tok, "preprocessor_config.json": map[string]any{"dynamic_hd": 36.0}} {
		if err := writeJSON(filepath.Join(dir, name), doc); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestConvertPhi4MM: the remote-code layout becomes the transformers one: the vision LoRA
// merged (W + alpha / r * B·A, checked in float64 to within the output's rounding), the image
// embedding's tensors renamed, the speech LoRA and audio tower gone, id 200010 named <|image|>,
// the config in the transformers layout; in F32 and BF16.
func TestConvertPhi4MM(t *testing.T) {
	for _, dtype := range []string{"F32", "BF16"} {
		t.Run(dtype, func(t *testing.T) {
			from := writeHub(t, dtype, nil)
			cfg, err := readJSON(filepath.Join(from, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			dst := t.TempDir()
			if err := convertPhi4MM(t.Context(), from, dst, cfg, nil); err != nil {
				t.Fatal(err)
			}
			got, err := ReadSafetensorsHeader(filepath.Join(dst, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]STensor{}
			var names []string
			for _, g := range got {
				byName[g.Name] = g
				names = append(names, g.Name)
			}
			want := []string{
				"model.embed_tokens.weight",
				phi4ImagePrefix + "global_img_feature_extensor",
				phi4ImagePrefix + "img_processor.embeddings.patch_embedding.weight",
				phi4ImagePrefix + "img_projection_down.weight",
				phi4ImagePrefix + "img_projection_up.bias",
				phi4ImagePrefix + "img_projection_up.weight",
				phi4ImagePrefix + "sub_img_feature_extensor",
				"model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.gate_up_proj.weight",
				"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.qkv_proj.weight",
				"model.norm.weight",
			}
			if strings.Join(names, " ") != strings.Join(want, " ") {
				t.Fatalf("tensors\n%v\nwant\n%v", names, want)
			}
			hub := map[string]hubTensor{}
			for _, h := range writeHubTensors(t, dtype) {
				hub[h.name] = h
			}
			// the merged products: base + 3 * B·A, within a few roundings of float32 (and one of
			// bf16's 8 bits)
			ulp := map[string]float64{"F32": 4 * 0x1p-23, "BF16": 0x1p-8}[dtype]
			for _, p := range []string{"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"} {
				stem := "model.layers.0." + p
				base, a, b := hub[stem+".base_layer.weight"], hub[stem+".lora_A.vision.weight"], hub[stem+".lora_B.vision.weight"]
				out := byName[stem+".weight"]
				if out.DType != dtype || len(out.Shape) != 2 || out.Shape[0] != base.shape[0] || out.Shape[1] != base.shape[1] {
					t.Fatalf("%s: %s %v", out.Name, out.DType, out.Shape)
				}
				v, err := out.Floats()
				if err != nil {
					t.Fatal(err)
				}
				bv, av, bb := base.values(), a.values(), b.values()
				rows, cols := base.shape[0], base.shape[1]
				for i := range rows {
					for j := range cols {
						w := float64(bv[i*cols+j])
						for r := range 2 {
							w += 3 * float64(bb[i*2+r]) * float64(av[r*cols+j])
						}
						if d := math.Abs(float64(v[i*cols+j]) - w); d > ulp*math.Max(1, math.Abs(w)) {
							t.Fatalf("%s[%d, %d] = %v, base + 3 B·A = %v", out.Name, i, j, v[i*cols+j], w)
						}
					}
				}
			}
			// a renamed tensor keeps its values
			g, err := byName[phi4ImagePrefix+"global_img_feature_extensor"].Floats()
			if err != nil {
				t.Fatal(err)
			}
			if w := hub[phi4ImagePrefix+"glb_GN"].values(); g[0] != w[0] || g[3] != w[3] {
				t.Errorf("global_img_feature_extensor %v, glb_GN %v", g, w)
			}
			hf, err := readJSON(filepath.Join(dst, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			vc, _ := hf["vision_config"].(map[string]any)
			if hf["model_type"] != "phi4_multimodal" || vc["crop_size"] != 448.0 || vc["image_token_id"] != 200010.0 ||
				hf["embd_layer"] != nil || hf["vision_lora"] != nil || hf["speech_lora"] != nil || hf["audio_processor"] != nil || hf["auto_map"] != nil {
				t.Errorf("config %v", hf)
			}
			tok, err := os.ReadFile(filepath.Join(dst, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(tok), `"<|image|>"`) || strings.Contains(string(tok), "endoftext10") {
				t.Errorf("tokenizer.json %s", tok)
			}
		})
	}
}

// writeHubTensors is writeHub's tensor list (for the expected values).
func writeHubTensors(t *testing.T, dtype string) []hubTensor {
	var out []hubTensor
	writeHub(t, dtype, func(_ map[string]any, ts []hubTensor) []hubTensor { out = ts; return ts })
	return out
}

// TestConvertPhi4MMRefuses: checkpoints the image path cannot serve are refused by name: audio
// only, speech LoRA only, another image embedding, a LoRA factor missing or left over, an
// adapter the build does not know.
func TestConvertPhi4MMRefuses(t *testing.T) {
	drop := func(name string) func(map[string]any, []hubTensor) []hubTensor {
		return func(_ map[string]any, ts []hubTensor) []hubTensor {
			var out []hubTensor
			for _, h := range ts {
				if h.name != name {
					out = append(out, h)
				}
			}
			return out
		}
	}
	for _, tc := range []struct {
		name string
		edit func(cfg map[string]any, ts []hubTensor) []hubTensor
		want string
	}{
		{"audio only", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			delete(cfg["embd_layer"].(map[string]any), "image_embd_layer")
			return ts
		}, "without its image path (audio only)"},
		{"speech LoRA only", func(cfg map[string]any, ts []hubTensor) []hubTensor { delete(cfg, "vision_lora"); return ts }, "adapted for speech only"},
		{"no LoRA", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			delete(cfg, "vision_lora")
			delete(cfg, "speech_lora")
			return ts
		}, "no vision_lora"},
		{"rank 0", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			cfg["vision_lora"].(map[string]any)["r"] = 0.0
			return ts
		}, "both must be positive"},
		{"glb_sub order", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			cfg["embd_layer"].(map[string]any)["image_embd_layer"].(map[string]any)["hd_transform_order"] = "glb_sub"
			return ts
		}, "hd_transform_order is glb_sub"},
		{"linear projection", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			cfg["embd_layer"].(map[string]any)["image_embd_layer"].(map[string]any)["projection_cls"] = "linear"
			return ts
		}, "projection_cls is linear"},
		{"lora_B missing", drop("model.layers.0.mlp.down_proj.lora_B.vision.weight"), "its vision LoRA"},
		{"base missing", drop("model.layers.0.mlp.down_proj.base_layer.weight"), "no base_layer weight"},
		{"unknown adapter", func(_ map[string]any, ts []hubTensor) []hubTensor {
			return append(ts, hubTensor{"model.layers.0.mlp.down_proj.lora_A.code.weight", "F32", []int{2, 6}, 1})
		}, "an adapter the phi4_multimodal build does not know"},
		{"rank mismatch", func(_ map[string]any, ts []hubTensor) []hubTensor {
			for i := range ts {
				if ts[i].name == "model.layers.0.mlp.down_proj.lora_A.vision.weight" {
					ts[i].shape = []int{3, 6}
				}
			}
			return ts
		}, "do not fit"},
		{"crop sizes differ", func(cfg map[string]any, ts []hubTensor) []hubTensor {
			cfg["vision_config"] = map[string]any{"crop_size": 336.0}
			return ts
		}, "vision_config.crop_size 336 and embd_layer.image_embd_layer.crop_size 448 differ"},
		{"a weight twice", func(_ map[string]any, ts []hubTensor) []hubTensor {
			return append(ts, hubTensor{"model.layers.0.mlp.down_proj.weight", "F32", []int{8, 6}, 9})
		}, "both become model.layers.0.mlp.down_proj.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := writeHub(t, "F32", tc.edit)
			plugin := filepath.Join(t.TempDir(), "p.wasm")
			if err := os.WriteFile(plugin, []byte("\x00asm"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "b")
			_, err := Build(t.Context(), BuildOptions{From: from, Family: "phi4_multimodal", Out: out, Plugin: plugin})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Errorf("a refused build left %d entries beside the bundle", len(entries))
			}
		})
	}
}

// writeF16 adds a shard holding one F16 tensor to dir (a dtype the builder does not convert).
func writeF16(t *testing.T, dir string) {
	t.Helper()
	hdr := []byte(`{"model.extra.weight":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`)
	raw := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	raw = append(append(raw, hdr...), 0, 0x3c, 0, 0x40)
	if err := os.WriteFile(filepath.Join(dir, "model-extra.safetensors"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPhi4Refusals: the checks that need more than an edited list: a config that is not the
// remote code's, an F16 tensor in either layout, an adapter of another PEFT type.
func TestPhi4Refusals(t *testing.T) {
	if _, _, err := ConvertPhi4MMConfig(map[string]any{"model_type": "phi4_multimodal"}); err == nil || !strings.Contains(err.Error(), `model_type "phi4_multimodal", not phi4mm`) {
		t.Errorf("a transformers-layout config: %v", err)
	}
	hub := writeHub(t, "F32", nil)
	writeF16(t, hub)
	cfg, err := readJSON(filepath.Join(hub, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := convertPhi4MM(t.Context(), hub, t.TempDir(), cfg, nil); err == nil || !strings.Contains(err.Error(), "model.extra.weight: dtype F16") {
		t.Errorf("an F16 tensor in the hub layout: %v", err)
	}
	hf, _, _ := writeAdapterCheckpoint(t, nil)
	writeF16(t, hf)
	if err := mergePhi4Adapter(t.Context(), hf, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "model.extra.weight: dtype F16") {
		t.Errorf("an F16 tensor beside an adapter: %v", err)
	}
	ia3, _, _ := writeAdapterCheckpoint(t, func(ac map[string]any, ts []hubTensor) []hubTensor { ac["peft_type"] = "IA3"; return ts })
	if err := mergePhi4Adapter(t.Context(), ia3, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "peft_type IA3, not LORA") {
		t.Errorf("an IA3 adapter: %v", err)
	}
}

// TestSafetensorsRoundTrip: declared tensors come back with their dtypes, shapes and values,
// bf16 rounded to nearest even; out-of-order and missing writes are refused.
func TestSafetensorsRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.safetensors")
	decl := []STensor{{Name: "a", DType: "F32", Shape: []int{2, 3}}, {Name: "b", DType: "BF16", Shape: []int{3}}}
	w, err := CreateSafetensors(p, decl)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("b", make([]byte, 6)); err == nil {
		t.Error("a tensor written out of order was taken")
	}
	a := []float32{1, -2, 3.5, 0, 1e-3, -7}
	ab, _ := EncodeFloats("F32", a)
	// 1 + 2^-8 is halfway between two bf16 values: even (1) wins; 1 + 3 * 2^-8 rounds up
	bv := []float32{1 + 0x1p-8, 1 + 3*0x1p-8, -0.15625}
	bb, _ := EncodeFloats("BF16", bv)
	if err := w.Write("a", ab); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "not written") {
		t.Errorf("closing with a tensor unwritten: %v", err)
	}
	w, err = CreateSafetensors(p, decl)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("a", ab); err != nil {
		t.Fatal(err)
	}
	if err := w.Write("b", bb); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSafetensorsHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].DType != "BF16" || got[0].Shape[1] != 3 {
		t.Fatalf("header %+v", got)
	}
	va, _ := got[0].Floats()
	vb, _ := got[1].Floats()
	want := []float32{1, 1 + 4*0x1p-8, -0.15625}
	for i := range a {
		if va[i] != a[i] {
			t.Errorf("a[%d] = %v, want %v", i, va[i], a[i])
		}
	}
	for i := range want {
		if vb[i] != want[i] {
			t.Errorf("b[%d] = %v, want %v", i, vb[i], want[i])
		}
	}
	raw, _ := os.ReadFile(p)
	var hdr map[string]json.RawMessage
	n := int(raw[0]) | int(raw[1])<<8
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil || (8+n)%8 != 0 {
		t.Errorf("header of %d bytes: %v", n, err)
	}
}

// writeAdapterCheckpoint writes a tiny transformers-format checkpoint (two products of one layer,
// a norm) with a vision-lora PEFT adapter of rank 2, lora_alpha 6, and a speech-lora folder the
// build must ignore; edit changes the adapter's config and tensors.
func writeAdapterCheckpoint(t *testing.T, edit func(ac map[string]any, ts []hubTensor) []hubTensor) (string, []hubTensor, []hubTensor) {
	t.Helper()
	dir := t.TempDir()
	model := []hubTensor{
		{"model.layers.0.self_attn.qkv_proj.weight", "BF16", []int{16, 8}, 1},
		{"model.layers.0.mlp.down_proj.weight", "BF16", []int{8, 6}, 2},
		{"model.norm.weight", "BF16", []int{8}, 3},
	}
	adapter := []hubTensor{
		{"base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight", "F32", []int{2, 8}, 4},
		{"base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight", "F32", []int{16, 2}, 5},
		{"base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", "F32", []int{2, 6}, 6},
		{"base_model.model.model.layers.0.mlp.down_proj.lora_B.weight", "F32", []int{8, 2}, 7},
	}
	ac := map[string]any{"peft_type": "LORA", "r": 2.0, "lora_alpha": 6.0, "target_modules": []any{"qkv_proj", "down_proj"},
		"bias": "none", "use_rslora": false, "use_dora": false, "fan_in_fan_out": false, "rank_pattern": map[string]any{}}
	if edit != nil {
		adapter = edit(ac, adapter)
	}
	write := func(path string, ts []hubTensor) {
		decl := make([]STensor, len(ts))
		for i, h := range ts {
			decl[i] = STensor{Name: h.name, DType: h.dtype, Shape: h.shape}
		}
		w, err := CreateSafetensors(path, decl)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range ts {
			b, _ := EncodeFloats(h.dtype, h.values())
			if err := w.Write(h.name, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "model.safetensors"), model)
	for _, sub := range []string{phi4AdapterDir, "speech-lora"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, phi4AdapterDir, "adapter_model.safetensors"), adapter)
	// the speech adapter: not a LoRA of these shapes at all; never read
	if err := os.WriteFile(filepath.Join(dir, "speech-lora", "adapter_model.safetensors"), []byte("not read"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"model_type": "phi4_multimodal"}
	tok := map[string]any{"added_tokens": []any{map[string]any{"id": 200010.0, "content": "<|image|>"}}}
	for name, doc := range map[string]any{"config.json": cfg, "tokenizer.json": tok, phi4AdapterDir + "/adapter_config.json": ac} {
		if err := writeJSON(filepath.Join(dir, name), doc); err != nil {
			t.Fatal(err)
		}
	}
	return dir, model, adapter
}

// TestMergePhi4Adapter: a transformers-format checkpoint's vision-lora adapter is merged into the
// weights it adapts (W + 3 B·A, rounded once to the weight's bf16), the rest copied as it is.
func TestMergePhi4Adapter(t *testing.T) {
	from, model, adapter := writeAdapterCheckpoint(t, nil)
	dst := t.TempDir()
	if err := mergePhi4Adapter(t.Context(), from, dst, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSafetensorsHeader(filepath.Join(dst, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("tensors %+v", got)
	}
	ad := map[string]hubTensor{}
	for _, h := range adapter {
		ad[h.name] = h
	}
	for i, m := range model {
		g := got[map[string]int{"model.layers.0.mlp.down_proj.weight": 0, "model.layers.0.self_attn.qkv_proj.weight": 1, "model.norm.weight": 2}[m.name]]
		if g.Name != m.name || g.DType != "BF16" {
			t.Fatalf("tensor %d: %s %s, want %s BF16", i, g.Name, g.DType, m.name)
		}
		v, err := g.Floats()
		if err != nil {
			t.Fatal(err)
		}
		base := m.values()
		if m.name == "model.norm.weight" {
			for j := range v {
				if v[j] != base[j] {
					t.Fatalf("%s changed", m.name)
				}
			}
			continue
		}
		stem := "base_model.model." + strings.TrimSuffix(m.name, ".weight")
		a, b := ad[stem+".lora_A.weight"].values(), ad[stem+".lora_B.weight"].values()
		rows, cols := m.shape[0], m.shape[1]
		for r := range rows {
			for c := range cols {
				w := float64(base[r*cols+c])
				for k := range 2 {
					w += 3 * float64(b[r*2+k]) * float64(a[k*cols+c])
				}
				if d := math.Abs(float64(v[r*cols+c]) - w); d > 0x1p-8*math.Max(1, math.Abs(w)) {
					t.Fatalf("%s[%d, %d] = %v, W + 3 B·A = %v", m.name, r, c, v[r*cols+c], w)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "tokenizer.json")); err != nil {
		t.Error(err)
	}
}

// TestMergePhi4AdapterRefuses: adapters that would not merge as a plain LoRA, or that do not fit
// the checkpoint, are refused by name.
func TestMergePhi4AdapterRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(ac map[string]any, ts []hubTensor) []hubTensor
		want string
	}{
		{"DoRA", func(ac map[string]any, ts []hubTensor) []hubTensor { ac["use_dora"] = true; return ts }, "use_dora is true"},
		{"rsLoRA", func(ac map[string]any, ts []hubTensor) []hubTensor { ac["use_rslora"] = true; return ts }, "use_rslora is true"},
		{"rank pattern", func(ac map[string]any, ts []hubTensor) []hubTensor {
			ac["rank_pattern"] = map[string]any{"qkv_proj": 4.0}
			return ts
		}, "rank_pattern"},
		{"no alpha", func(ac map[string]any, ts []hubTensor) []hubTensor { delete(ac, "lora_alpha"); return ts }, "both must be positive"},
		{"a factor missing", func(_ map[string]any, ts []hubTensor) []hubTensor { return ts[1:] }, "one LoRA factor of two"},
		{"a module the checkpoint lacks", func(_ map[string]any, ts []hubTensor) []hubTensor {
			return append(ts, hubTensor{"base_model.model.model.layers.0.mlp.gate_up_proj.lora_A.weight", "F32", []int{2, 8}, 9},
				hubTensor{"base_model.model.model.layers.0.mlp.gate_up_proj.lora_B.weight", "F32", []int{12, 2}, 10})
		}, "adapts model.layers.0.mlp.gate_up_proj, which the checkpoint lacks"},
		{"not a LoRA factor", func(_ map[string]any, ts []hubTensor) []hubTensor {
			return append(ts, hubTensor{"base_model.model.model.layers.0.mlp.down_proj.lora_magnitude_vector", "F32", []int{8}, 9})
		}, "is not a LoRA factor"},
		{"rank mismatch", func(_ map[string]any, ts []hubTensor) []hubTensor { ts[0].shape = []int{3, 8}; return ts }, "do not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, _, _ := writeAdapterCheckpoint(t, tc.edit)
			err := mergePhi4Adapter(t.Context(), from, t.TempDir(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBuildPhi4SpeechAdapterOnly: a transformers-format checkpoint with a speech adapter and no
// vision adapter is refused by name (image prompts need the vision LoRA).
func TestBuildPhi4SpeechAdapterOnly(t *testing.T) {
	from, _, _ := writeAdapterCheckpoint(t, nil)
	if err := os.RemoveAll(filepath.Join(from, phi4AdapterDir)); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(t.TempDir(), "p.wasm")
	if err := os.WriteFile(plugin, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(t.Context(), BuildOptions{From: from, Family: "phi4_multimodal", Out: filepath.Join(t.TempDir(), "b"), Plugin: plugin})
	if err == nil || !strings.Contains(err.Error(), "adapted for speech only") {
		t.Fatalf("err = %v, want a refusal naming the speech-only adapter", err)
	}
}

// TestSafetensorsRefusals: malformed files and writes are refused by name.
func TestSafetensorsRefusals(t *testing.T) {
	dir := t.TempDir()
	files := 0
	file := func(hdr string, data int) string {
		raw := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		raw = append(append(raw, hdr...), make([]byte, data)...)
		files++
		p := filepath.Join(dir, fmt.Sprintf("f%d.safetensors", files))
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"header past the file", func() string {
			p := filepath.Join(dir, "short.safetensors")
			if err := os.WriteFile(p, binary.LittleEndian.AppendUint64(nil, 1000), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}(), "header of 1000 bytes in a file of 8"},
		{"not JSON", file(`{"a":`, 0), "parsing the header"},
		{"tensor past the file", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `tensor "a" at bytes`},
		{"bytes for another shape", file(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), `tensor "a": 8 bytes for F32 [3]`},
		{"an entry not a tensor", file(`{"a":{"dtype":"F32","shape":"x","data_offsets":[0,8]}}`, 8), `tensor "a":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadSafetensorsHeader(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := CreateSafetensors(filepath.Join(dir, "x.safetensors"), []STensor{{Name: "a", DType: "I64", Shape: []int{1}}}); err == nil || !strings.Contains(err.Error(), `tensor "a": dtype I64`) {
		t.Errorf("an I64 tensor declared: %v", err)
	}
	w, err := CreateSafetensors(filepath.Join(dir, "y.safetensors"), []STensor{{Name: "a", DType: "F32", Shape: []int{2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("a", make([]byte, 4)); err == nil || !strings.Contains(err.Error(), `tensor "a": 4 bytes for F32 [2]`) {
		t.Errorf("a short write: %v", err)
	}
	if err := w.Write("b", make([]byte, 8)); err == nil || !strings.Contains(err.Error(), `tensor "b" written out of order`) {
		t.Errorf("an undeclared tensor: %v", err)
	}
	w.Close()
	if _, err := EncodeFloats("F16", []float32{1}); err == nil {
		t.Error("F16 encoded")
	}
	if _, err := decodeFloats("I8", []byte{1}); err == nil {
		t.Error("I8 decoded")
	}
}
