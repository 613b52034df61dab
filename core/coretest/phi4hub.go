package coretest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/iris-vlm/iris/bundles"
)

// Phi4Hub is Phi4's checkpoint laid out as the hub's remote-code Phi-4-multimodal
// (Phi4MMForCausalLM, model_type phi4mm): the same weights, each decoder product split into a
// base_layer weight and a vision LoRA (W = base + 2 B·A) beside a speech LoRA the image path
// must ignore, the image embedding under its hub names, an audio tensor, the hub's config keys
// and <|endoftext10|> for id 200010. `iris bundle build` converts it back (bundles/phi4mm.go);
// its answers must be Phi4's, transformers'.
const Phi4Hub = "phi4-hub-seeded"

// phi4HubLoRA is the synthetic checkpoint's vision LoRA: rank 3, lora_alpha 6 (scale 2).
const (
	phi4HubRank  = 3
	phi4HubAlpha = 6.0
)

// writePhi4Hub writes the remote-code layout of the transformers-layout checkpoint in src into
// dst.
func writePhi4Hub(src, dst string) error {
	var cfg map[string]any
	if err := readJSONFile(filepath.Join(src, "config.json"), &cfg); err != nil {
		return err
	}
	hub := map[string]any{}
	for k, v := range cfg {
		switch k {
		case "architectures", "model_type", "rope_parameters", "audio_config", "transformers_version", "dtype":
			continue
		}
		hub[k] = v
	}
	hub["model_type"] = "phi4mm"
	hub["architectures"] = []any{"Phi4MMForCausalLM"}
	hub["auto_map"] = map[string]any{"AutoConfig": "configuration_phi4mm.Phi4MMConfig", "AutoModelForCausalLM": "modeling_phi4mm.Phi4MMForCausalLM"}
	// rope as the hub writes it: theta and the partial factor at the top level, LongRoPE's
	// factors under rope_scaling
	rp, _ := cfg["rope_parameters"].(map[string]any)
	hub["rope_theta"], hub["partial_rotary_factor"] = rp["rope_theta"], rp["partial_rotary_factor"]
	if rp["rope_type"] == "longrope" {
		hub["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": rp["short_factor"], "long_factor": rp["long_factor"]}
	}
	vc, _ := cfg["vision_config"].(map[string]any)
	hub["vision_config"] = vc // the tiny tower's shape (the hub's is fixed in its code)
	hub["embd_layer"] = map[string]any{
		"embedding_cls": "image_audio",
		"image_embd_layer": map[string]any{"crop_size": vc["crop_size"], "embedding_cls": "tune_image", "hd_transform_order": "sub_glb",
			"image_token_compression_cls": "avg_pool_2d", "projection_cls": "mlp", "use_hd_transform": true, "with_learnable_separator": true},
		"audio_embd_layer": map[string]any{"downsample_rate": 1, "embedding_cls": "audio"},
	}
	hub["audio_processor"] = map[string]any{"config": map[string]any{"attention_dim": 32}, "name": "cascades"}
	hub["vision_lora"] = map[string]any{"dp": 0.0, "layer": `layers.*((self_attn\.(qkv_proj|o_proj))|(mlp\.(gate_up|down)_proj))`, "lora_alpha": phi4HubAlpha, "r": phi4HubRank}
	hub["speech_lora"] = map[string]any{"dp": 0.01, "layer": `((layers.*self_attn\.(qkv|o)_proj)|(layers.*mlp\.(gate_up|down)_proj))`, "lora_alpha": 4, "r": 2}
	if err := writeJSONFile(filepath.Join(dst, "config.json"), hub); err != nil {
		return err
	}
	if err := writePhi4HubWeights(filepath.Join(src, "model.safetensors"), filepath.Join(dst, "model.safetensors")); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		var doc map[string]any
		if err := readJSONFile(filepath.Join(src, name), &doc); err != nil {
			return err
		}
		hubImageToken(doc)
		if err := writeJSONFile(filepath.Join(dst, name), doc); err != nil {
			return err
		}
	}
	for _, name := range []string{"preprocessor_config.json", "generation_config.json", "chat_template.jinja"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hubImageToken names id 200010 <|endoftext10|>, as the hub's tokenizer does.
func hubImageToken(doc map[string]any) {
	if list, ok := doc["added_tokens"].([]any); ok {
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["id"] == 200010.0 {
				m["content"] = "<|endoftext10|>"
			}
		}
	}
	if dec, ok := doc["added_tokens_decoder"].(map[string]any); ok {
		if m, ok := dec["200010"].(map[string]any); ok {
			m["content"] = "<|endoftext10|>"
		}
	}
}

// hubNames are the image embedding's tensors under their hub names (model.embed_tokens_extend.image_embed.).
var hubNames = map[string]string{
	"global_img_feature_extensor": "glb_GN",
	"sub_img_feature_extensor":    "sub_GN",
	"img_projection_up.weight":    "img_projection.0.weight",
	"img_projection_up.bias":      "img_projection.0.bias",
	"img_projection_down.weight":  "img_projection.2.weight",
	"img_projection_down.bias":    "img_projection.2.bias",
}

// loraProducts are the decoder products the hub's LoRAs adapt.
var loraProducts = []string{".self_attn.qkv_proj.weight", ".self_attn.o_proj.weight", ".mlp.gate_up_proj.weight", ".mlp.down_proj.weight"}

// writePhi4HubWeights writes the hub-layout tensors of the transformers-layout file src.
func writePhi4HubWeights(src, dst string) error {
	ts, err := bundles.ReadSafetensorsHeader(src)
	if err != nil {
		return err
	}
	type out struct {
		t    bundles.STensor
		data func() ([]float32, error)
	}
	var outs []out
	const img = "model.embed_tokens_extend.image_embed."
	for _, t := range ts {
		if t.DType != "F32" {
			return fmt.Errorf("%s: %s, the seeded checkpoints are F32", t.Name, t.DType)
		}
		stem, product := "", false
		for _, p := range loraProducts {
			if s, ok := strings.CutSuffix(t.Name, p); ok && strings.HasPrefix(s, "model.layers.") {
				stem, product = t.Name[:len(t.Name)-len(".weight")], true
			}
		}
		if !product {
			name := t.Name
			if rest, ok := strings.CutPrefix(name, img); ok && hubNames[rest] != "" {
				name = img + hubNames[rest]
			}
			outs = append(outs, out{bundles.STensor{Name: name, DType: "F32", Shape: t.Shape}, t.Floats})
			continue
		}
		rows, cols := t.Shape[0], t.Shape[1]
		seed := float64(len(outs))
		a, b, base := splitLoRA(t, seed)
		constant := func(v []float32) func() ([]float32, error) { return func() ([]float32, error) { return v, nil } }
		outs = append(outs,
			out{bundles.STensor{Name: stem + ".base_layer.weight", DType: "F32", Shape: t.Shape}, base},
			out{bundles.STensor{Name: stem + ".lora_A.vision.weight", DType: "F32", Shape: []int{phi4HubRank, cols}}, constant(a)},
			out{bundles.STensor{Name: stem + ".lora_B.vision.weight", DType: "F32", Shape: []int{rows, phi4HubRank}}, constant(b)},
			// a speech adapter large enough to change every answer were it merged
			out{bundles.STensor{Name: stem + ".lora_A.speech.weight", DType: "F32", Shape: []int{2, cols}}, constant(synth(2*cols, seed+0.25, 1))},
			out{bundles.STensor{Name: stem + ".lora_B.speech.weight", DType: "F32", Shape: []int{rows, 2}}, constant(synth(rows*2, seed+0.75, 1))})
	}
	outs = append(outs, out{bundles.STensor{Name: "model.embed_tokens_extend.audio_embed.encoder.encoders.0.self_attn.linear_q.weight", DType: "F32", Shape: []int{4, 4}},
		func() ([]float32, error) { return synth(16, 7, 1), nil }})
	decl := make([]bundles.STensor, len(outs))
	for i, o := range outs {
		decl[i] = o.t
	}
	w, err := bundles.CreateSafetensors(dst, decl)
	if err != nil {
		return err
	}
	for _, o := range outs {
		v, err := o.data()
		if err != nil {
			w.Close()
			return err
		}
		raw, err := bundles.EncodeFloats("F32", v)
		if err == nil {
			err = w.Write(o.t.Name, raw)
		}
		if err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// splitLoRA makes a rank-3 vision LoRA (A, B) for the product t and the base weight it adapts:
// W - scale * B·A, the product summed over the rank in order as the bundle builder merges it.
func splitLoRA(t bundles.STensor, seed float64) (a, b []float32, base func() ([]float32, error)) {
	rows, cols := t.Shape[0], t.Shape[1]
	a = synth(phi4HubRank*cols, seed, 0.15)
	b = synth(rows*phi4HubRank, seed+0.5, 0.15)
	base = func() ([]float32, error) {
		w, err := t.Floats()
		if err != nil {
			return nil, err
		}
		scale := float32(phi4HubAlpha / phi4HubRank)
		delta := make([]float32, cols)
		for i := range rows {
			clear(delta)
			for r := range phi4HubRank {
				for j := range cols {
					delta[j] += b[i*phi4HubRank+r] * a[r*cols+j]
				}
			}
			for j := range cols {
				w[i*cols+j] -= scale * delta[j]
			}
		}
		return w, nil
	}
	return a, b, base
}

// Phi4Adapter is Phi4's checkpoint in the transformers layout with its vision LoRA beside it, as
// the hub's transformers-format revision ships it: model.safetensors holds the base weights
// (W - 2 B·A for each decoder product), vision-lora/ the PEFT adapter (rank 3, lora_alpha 6), and
// speech-lora/ another the image path must ignore. `iris bundle build` merges vision-lora; its
// answers must be Phi4's, transformers'.
const Phi4Adapter = "phi4-adapter-seeded"

// writePhi4Adapter writes the adapter layout of the transformers-layout checkpoint in src into
// dst.
func writePhi4Adapter(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "model.safetensors" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	ts, err := bundles.ReadSafetensorsHeader(filepath.Join(src, "model.safetensors"))
	if err != nil {
		return err
	}
	type out struct {
		t    bundles.STensor
		data func() ([]float32, error)
	}
	var model, adapter []out
	for i, t := range ts {
		product := false
		for _, p := range loraProducts {
			product = product || (strings.HasSuffix(t.Name, p) && strings.HasPrefix(t.Name, "model.layers."))
		}
		if !product {
			model = append(model, out{t, t.Floats})
			continue
		}
		a, b, base := splitLoRA(t, float64(i))
		stem := "base_model.model." + strings.TrimSuffix(t.Name, ".weight")
		model = append(model, out{t, base})
		adapter = append(adapter,
			out{bundles.STensor{Name: stem + ".lora_A.weight", DType: "F32", Shape: []int{phi4HubRank, t.Shape[1]}}, func() ([]float32, error) { return a, nil }},
			out{bundles.STensor{Name: stem + ".lora_B.weight", DType: "F32", Shape: []int{t.Shape[0], phi4HubRank}}, func() ([]float32, error) { return b, nil }})
	}
	write := func(path string, outs []out) error {
		decl := make([]bundles.STensor, len(outs))
		for i, o := range outs {
			decl[i] = bundles.STensor{Name: o.t.Name, DType: "F32", Shape: o.t.Shape}
		}
		w, err := bundles.CreateSafetensors(path, decl)
		if err != nil {
			return err
		}
		for _, o := range outs {
			v, err := o.data()
			if err != nil {
				w.Close()
				return err
			}
			raw, err := bundles.EncodeFloats("F32", v)
			if err == nil {
				err = w.Write(o.t.Name, raw)
			}
			if err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	}
	if err := write(filepath.Join(dst, "model.safetensors"), model); err != nil {
		return err
	}
	for _, sub := range []string{"vision-lora", "speech-lora"} {
		if err := os.Mkdir(filepath.Join(dst, sub), 0o755); err != nil {
			return err
		}
	}
	if err := write(filepath.Join(dst, "vision-lora", "adapter_model.safetensors"), adapter); err != nil {
		return err
	}
	ac := map[string]any{"peft_type": "LORA", "r": phi4HubRank, "lora_alpha": phi4HubAlpha, "bias": "none", "use_rslora": false,
		"use_dora": false, "fan_in_fan_out": false, "target_modules": []string{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}}
	if err := writeJSONFile(filepath.Join(dst, "vision-lora", "adapter_config.json"), ac); err != nil {
		return err
	}
	// a speech adapter of another rank: merged, it would fail the shapes and change the answers
	return writeJSONFile(filepath.Join(dst, "speech-lora", "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 2, "lora_alpha": 4})
}

// synth is n deterministic values of magnitude up to amp.
func synth(n int, seed, amp float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(amp * math.Sin(seed*7.31+0.61*float64(i)))
	}
	return v
}

func readJSONFile(p string, v any) error {
	raw, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

func writeJSONFile(p string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(p, raw, 0o644)
}
