package bundles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// The hub's original Phi-4-multimodal checkpoint (microsoft/Phi-4-multimodal-instruct, remote
// code: Phi4MMForCausalLM, model_type phi4mm) is converted into the transformers layout
// (Phi4MultimodalForCausalLM, model_type phi4_multimodal) before it is bundled, as transformers'
// convert_phi4_multimodal_weights_to_hf.py does, with one difference: the vision LoRA is merged
// into the decoder weights it adapts (W + lora_alpha / r * B·A, PEFT's scaling), because the
// remote code runs every token of an image prompt through the vision adapter, and the bundle
// serves image prompts only. The speech LoRA and the audio tower are left out.

// phi4HubModelType is the remote-code checkpoint's model_type.
const phi4HubModelType = "phi4mm"

// phi4ImageTokenID is the remote code's _IMAGE_SPECIAL_TOKEN_ID (<|endoftext10|> in the hub's
// tokenizer, <|image|> in transformers').
const phi4ImageTokenID = 200010

// phi4HubRenames are the image embedding's tensors whose names the transformers port changed
// (prefix model.embed_tokens_extend.image_embed.).
var phi4HubRenames = [][2]string{
	{"glb_GN", "global_img_feature_extensor"},
	{"sub_GN", "sub_img_feature_extensor"},
	{"img_projection.0.", "img_projection_up."},
	{"img_projection.2.", "img_projection_down."},
}

const phi4ImagePrefix = "model.embed_tokens_extend.image_embed."

// ConvertPhi4MMConfig is the transformers-layout config.json of a remote-code one: the decoder's
// keys as they are, the image embedding's settings checked and its crop_size moved into
// vision_config, the audio settings and both LoRA configs dropped. It refuses a checkpoint
// without the image path (audio only) or without the vision LoRA (speech LoRA only), and an
// image embedding other than the HD transform the family implements. It returns the vision
// LoRA's scaling (lora_alpha / r) too.
func ConvertPhi4MMConfig(cfg map[string]any) (map[string]any, float32, error) {
	if mt, _ := cfg["model_type"].(string); mt != phi4HubModelType {
		return nil, 0, fmt.Errorf("config.json: model_type %q, not %s", mt, phi4HubModelType)
	}
	embd, _ := cfg["embd_layer"].(map[string]any)
	img, _ := embd["image_embd_layer"].(map[string]any)
	if img == nil {
		return nil, 0, errors.New("config.json: embd_layer has no image_embd_layer: a Phi-4-multimodal checkpoint without its image path (audio only); the phi4_multimodal family serves image prompts")
	}
	vl, _ := cfg["vision_lora"].(map[string]any)
	if vl == nil {
		if cfg["speech_lora"] != nil {
			return nil, 0, errors.New("config.json: speech_lora and no vision_lora: a checkpoint adapted for speech only; image prompts run through the vision LoRA, which it lacks")
		}
		return nil, 0, errors.New("config.json: no vision_lora: image prompts run through the vision LoRA, which the checkpoint lacks")
	}
	r, _ := vl["r"].(float64)
	alpha, _ := vl["lora_alpha"].(float64)
	if r <= 0 || alpha <= 0 {
		return nil, 0, fmt.Errorf("config.json: vision_lora r %v, lora_alpha %v: both must be positive", vl["r"], vl["lora_alpha"])
	}
	for key, want := range map[string]any{
		"use_hd_transform": true, "with_learnable_separator": true, "hd_transform_order": "sub_glb",
		"image_token_compression_cls": "avg_pool_2d", "projection_cls": "mlp",
	} {
		if got, ok := img[key]; ok && !sameJSON(got, want) {
			return nil, 0, fmt.Errorf("config.json: embd_layer.image_embd_layer.%s is %v, but the phi4_multimodal family implements %v", key, got, want)
		}
	}
	crop := 448.0
	if c, ok := img["crop_size"].(float64); ok {
		crop = c
	}
	out := map[string]any{}
	for k, v := range cfg {
		switch k {
		case "_name_or_path", "architectures", "auto_map", "vision_lora", "speech_lora", "transformers_version",
			"_attn_implementation", "embd_layer", "audio_processor":
			continue
		}
		out[k] = v
	}
	out["model_type"] = "phi4_multimodal"
	out["architectures"] = []any{"Phi4MultimodalForCausalLM"}
	// The hub's tower is SigLIP-so400m's, fixed in its code (Phi4MultimodalVisionConfig's
	// defaults); a vision_config in the remote-code config, which the hub's has not, is kept, so
	// that a small checkpoint made in this layout can say its tower's shape.
	vc := map[string]any{}
	if given, ok := cfg["vision_config"].(map[string]any); ok {
		maps.Copy(vc, given)
	}
	if c, ok := vc["crop_size"].(float64); ok && c != crop {
		return nil, 0, fmt.Errorf("config.json: vision_config.crop_size %v and embd_layer.image_embd_layer.crop_size %v differ", c, crop)
	}
	vc["model_type"], vc["crop_size"] = "phi4_multimodal_vision", crop
	if _, ok := vc["image_token_id"]; !ok {
		vc["image_token_id"] = float64(phi4ImageTokenID)
	}
	out["vision_config"] = vc
	return out, float32(alpha / r), nil
}

// convertPhi4MM writes the transformers-layout checkpoint of the remote-code one in from into
// dst (empty): config.json, model.safetensors (renamed, the vision LoRA merged, the audio tower
// and the speech LoRA left out), the tokenizer with id 200010 named <|image|>, and the other
// files copied.
func convertPhi4MM(ctx context.Context, from, dst string, cfg map[string]any, progress io.Writer) error {
	hf, scale, err := ConvertPhi4MMConfig(cfg)
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dst, "config.json"), hf); err != nil {
		return err
	}
	if err := convertPhi4Weights(ctx, from, dst, scale, progress); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		doc, err := readJSON(filepath.Join(from, name))
		if err != nil {
			if name == "tokenizer_config.json" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		renameImageToken(doc)
		if err := writeJSON(filepath.Join(dst, name), doc); err != nil {
			return err
		}
	}
	for _, name := range []string{"preprocessor_config.json", "generation_config.json", "chat_template.json", "chat_template.jinja"} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, name), data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renameImageToken names id 200010 <|image|> in a tokenizer.json (added_tokens) or a
// tokenizer_config.json (added_tokens_decoder), as transformers' tokenizer of the family does;
// the hub's calls it <|endoftext10|>.
func renameImageToken(doc map[string]any) {
	const name = "<|image|>"
	if list, ok := doc["added_tokens"].([]any); ok {
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["id"] == float64(phi4ImageTokenID) {
				m["content"] = name
			}
		}
	}
	if dec, ok := doc["added_tokens_decoder"].(map[string]any); ok {
		if m, ok := dec[fmt.Sprint(phi4ImageTokenID)].(map[string]any); ok {
			m["content"] = name
		}
	}
}

// phi4Source is one output tensor of the conversion: its source tensor and, for a weight the
// vision LoRA adapts, the adapter's A and B.
type phi4Source struct {
	out  STensor
	base STensor
	a, b *STensor
}

// convertPhi4Weights writes dst/model.safetensors from the checkpoint's shards.
func convertPhi4Weights(ctx context.Context, from, dst string, scale float32, progress io.Writer) error {
	files, err := weightFiles(from)
	if err != nil {
		return err
	}
	all := map[string]STensor{}
	for _, f := range files {
		ts, err := ReadSafetensorsHeader(filepath.Join(from, f))
		if err != nil {
			return err
		}
		for _, t := range ts {
			all[t.Name] = t
		}
	}
	var srcs []phi4Source
	used := map[string]bool{}
	for name, t := range all {
		switch {
		case strings.Contains(name, ".audio_embed."), strings.Contains(name, ".lora_A.speech."), strings.Contains(name, ".lora_B.speech."):
			used[name] = true // the audio tower and the speech adapter: not served
			continue
		case strings.Contains(name, ".lora_A.vision."), strings.Contains(name, ".lora_B.vision."):
			continue // merged below, with the base weight they adapt
		case strings.Contains(name, "lora"):
			return fmt.Errorf("tensor %s: an adapter the phi4_multimodal build does not know", name)
		}
		s := phi4Source{base: t, out: t}
		if stem, ok := strings.CutSuffix(name, ".base_layer.weight"); ok {
			s.out.Name = stem + ".weight"
			a, okA := all[stem+".lora_A.vision.weight"]
			b, okB := all[stem+".lora_B.vision.weight"]
			if !okA || !okB {
				return fmt.Errorf("tensor %s: its vision LoRA (%s.lora_A.vision.weight, lora_B) is missing", name, stem)
			}
			if len(t.Shape) != 2 || len(a.Shape) != 2 || len(b.Shape) != 2 || a.Shape[1] != t.Shape[1] || b.Shape[0] != t.Shape[0] || a.Shape[0] != b.Shape[1] {
				return fmt.Errorf("tensor %s %v: vision LoRA A %v, B %v do not fit", name, t.Shape, a.Shape, b.Shape)
			}
			s.a, s.b = &a, &b
			used[a.Name], used[b.Name] = true, true
		}
		if rest, ok := strings.CutPrefix(s.out.Name, phi4ImagePrefix); ok {
			for _, rn := range phi4HubRenames {
				if r, ok := strings.CutPrefix(rest, rn[0]); ok {
					s.out.Name = phi4ImagePrefix + rn[1] + r
				}
			}
		}
		if dtypeSize(t.DType) == 0 {
			return fmt.Errorf("tensor %s: dtype %s (F32 and BF16 are converted)", name, t.DType)
		}
		used[name] = true
		srcs = append(srcs, s)
	}
	for name := range all {
		if !used[name] {
			return fmt.Errorf("tensor %s: a vision LoRA factor with no base_layer weight to merge into", name)
		}
	}
	merged, err := writePhi4Tensors(ctx, filepath.Join(dst, "model.safetensors"), srcs, scale)
	if err != nil {
		return err
	}
	if progress != nil {
		fmt.Fprintf(progress, "converted the phi4mm checkpoint: %d tensors, the vision LoRA merged into %d (scale %g), the audio tower and speech LoRA left out\n", len(srcs), merged, scale)
	}
	return nil
}

// writePhi4Tensors writes the sources' tensors to path, sorted by name, each adapted one merged
// (base + scale * B·A); it returns how many were merged.
func writePhi4Tensors(ctx context.Context, path string, srcs []phi4Source, scale float32) (int, error) {
	slices.SortFunc(srcs, func(x, y phi4Source) int { return strings.Compare(x.out.Name, y.out.Name) })
	for i := 1; i < len(srcs); i++ {
		if srcs[i].out.Name == srcs[i-1].out.Name {
			return 0, fmt.Errorf("tensors %s and %s both become %s", srcs[i-1].base.Name, srcs[i].base.Name, srcs[i].out.Name)
		}
	}
	decl := make([]STensor, len(srcs))
	for i, s := range srcs {
		decl[i] = s.out
	}
	w, err := CreateSafetensors(path, decl)
	if err != nil {
		return 0, err
	}
	merged := 0
	for _, s := range srcs {
		if err := ctx.Err(); err != nil {
			w.Close()
			return 0, err
		}
		var data []byte
		if s.a == nil {
			data, err = s.base.Bytes()
		} else {
			data, err = mergeLoRA(s.base, *s.a, *s.b, scale)
			merged++
		}
		if err == nil {
			err = w.Write(s.out.Name, data)
		}
		if err != nil {
			w.Close()
			return 0, err
		}
	}
	return merged, w.Close()
}

// phi4AdapterDir is where a transformers-format Phi-4-multimodal checkpoint keeps its vision
// LoRA as a PEFT adapter (transformers' docs load it with load_adapter(subfolder="vision-lora")).
const phi4AdapterDir = "vision-lora"

// mergePhi4Adapter writes into dst the transformers-format checkpoint in from with its
// vision-lora PEFT adapter merged into the weights it adapts (W + lora_alpha / r * B·A), the
// other files copied; the speech adapter (speech-lora) is left out.
func mergePhi4Adapter(ctx context.Context, from, dst string, progress io.Writer) error {
	dir := filepath.Join(from, phi4AdapterDir)
	ac, err := readJSON(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		return err
	}
	r, _ := ac["r"].(float64)
	alpha, _ := ac["lora_alpha"].(float64)
	if r <= 0 || alpha <= 0 {
		return fmt.Errorf("%s/adapter_config.json: r %v, lora_alpha %v: both must be positive", phi4AdapterDir, ac["r"], ac["lora_alpha"])
	}
	// what would change the merge: another scaling, decomposed or transposed weights, biases
	for key, plain := range map[string]any{"use_rslora": false, "use_dora": false, "fan_in_fan_out": false, "bias": "none"} {
		if v, ok := ac[key]; ok && v != nil && !sameJSON(v, plain) {
			return fmt.Errorf("%s/adapter_config.json: %s is %v; a plain LoRA (%v) is merged", phi4AdapterDir, key, v, plain)
		}
	}
	for _, key := range []string{"rank_pattern", "alpha_pattern"} {
		if m, ok := ac[key].(map[string]any); ok && len(m) > 0 {
			return fmt.Errorf("%s/adapter_config.json: a %s (per-module ranks or alphas) is not merged", phi4AdapterDir, key)
		}
	}
	if pt, ok := ac["peft_type"].(string); ok && pt != "LORA" {
		return fmt.Errorf("%s/adapter_config.json: peft_type %s, not LORA", phi4AdapterDir, pt)
	}
	adapter, err := ReadSafetensorsHeader(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return err
	}
	// PEFT's names: base_model.model.<module>.lora_A.weight and lora_B.weight
	type pair struct{ a, b *STensor }
	pairs := map[string]*pair{}
	for i := range adapter {
		t := &adapter[i]
		rest, ok := strings.CutPrefix(t.Name, "base_model.model.")
		var module string
		var isA bool
		switch {
		case ok && strings.HasSuffix(rest, ".lora_A.weight"):
			module, isA = strings.TrimSuffix(rest, ".lora_A.weight"), true
		case ok && strings.HasSuffix(rest, ".lora_B.weight"):
			module = strings.TrimSuffix(rest, ".lora_B.weight")
		default:
			return fmt.Errorf("%s: tensor %s is not a LoRA factor (base_model.model.<module>.lora_A.weight or lora_B.weight)", phi4AdapterDir, t.Name)
		}
		p := pairs[module]
		if p == nil {
			p = &pair{}
			pairs[module] = p
		}
		if isA {
			p.a = t
		} else {
			p.b = t
		}
	}
	files, err := weightFiles(from)
	if err != nil {
		return err
	}
	var srcs []phi4Source
	for _, f := range files {
		ts, err := ReadSafetensorsHeader(filepath.Join(from, f))
		if err != nil {
			return err
		}
		for _, t := range ts {
			if dtypeSize(t.DType) == 0 {
				return fmt.Errorf("tensor %s: dtype %s (F32 and BF16 are converted)", t.Name, t.DType)
			}
			s := phi4Source{base: t, out: t}
			if module, ok := strings.CutSuffix(t.Name, ".weight"); ok && pairs[module] != nil {
				p := pairs[module]
				if p.a == nil || p.b == nil {
					return fmt.Errorf("%s: %s has one LoRA factor of two", phi4AdapterDir, module)
				}
				a, b := p.a, p.b
				if len(t.Shape) != 2 || len(a.Shape) != 2 || len(b.Shape) != 2 || a.Shape[1] != t.Shape[1] || b.Shape[0] != t.Shape[0] || a.Shape[0] != b.Shape[1] {
					return fmt.Errorf("tensor %s %v: %s's A %v, B %v do not fit", t.Name, t.Shape, phi4AdapterDir, a.Shape, b.Shape)
				}
				s.a, s.b = a, b
				delete(pairs, module)
			}
			srcs = append(srcs, s)
		}
	}
	if len(pairs) > 0 {
		left := slices.Sorted(maps.Keys(pairs))
		return fmt.Errorf("%s adapts %s, which the checkpoint lacks", phi4AdapterDir, strings.Join(left, ", "))
	}
	scale := float32(alpha / r)
	merged, err := writePhi4Tensors(ctx, filepath.Join(dst, "model.safetensors"), srcs, scale)
	if err != nil {
		return err
	}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json", "generation_config.json", "chat_template.json", "chat_template.jinja"} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, name), data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "merged %s into %d weights (scale %g)\n", phi4AdapterDir, merged, scale)
	}
	return nil
}

// mergeLoRA is base + scale * B·A in float32 (each row of the product summed over the rank in
// order), rounded to base's dtype.
func mergeLoRA(base, a, b STensor, scale float32) ([]byte, error) {
	w, err := base.Floats()
	if err != nil {
		return nil, err
	}
	av, err := a.Floats()
	if err != nil {
		return nil, err
	}
	bv, err := b.Floats()
	if err != nil {
		return nil, err
	}
	rows, cols, rank := base.Shape[0], base.Shape[1], a.Shape[0]
	workers := min(runtime.GOMAXPROCS(0), rows)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() {
			delta := make([]float32, cols)
			for i := k; i < rows; i += workers {
				clear(delta)
				for r := range rank {
					c := bv[i*rank+r]
					for j, x := range av[r*cols : (r+1)*cols] {
						delta[j] += c * x
					}
				}
				row := w[i*cols : (i+1)*cols]
				for j := range row {
					row[j] += scale * delta[j]
				}
			}
		})
	}
	wg.Wait()
	return EncodeFloats(base.DType, w)
}

// writeJSON writes v indented, with <, > and & as they are (tokens such as <|image|>).
func writeJSON(p string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}
