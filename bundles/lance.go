package bundles

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Lance's release layout (hub bytedance-research/Lance): the language model with its
// llm_config.json, weights and tokenizer in Lance_3B/, the Qwen2.5-VL tower in Qwen2.5-VL-ViT/
// (config.json, vit.safetensors). inference_lance.py builds the model from both.
const (
	lanceLLMDir = "Lance_3B"
	lanceViTDir = "Qwen2.5-VL-ViT"
)

// lanceRelease reports whether dir is Lance's release layout.
func lanceRelease(dir string) bool {
	_, err1 := os.Stat(filepath.Join(dir, lanceLLMDir, "llm_config.json"))
	_, err2 := os.Stat(filepath.Join(dir, lanceViTDir, "config.json"))
	return err1 == nil && err2 == nil
}

// stTensor is one tensor of a safetensors file: its header entry and where its bytes are.
type stTensor struct {
	Dtype   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets [2]int64
	file    string
	base    int64 // the file's data section
}

// readSafetensorsHeader lists the tensors of a safetensors file.
func readSafetensorsHeader(path string) (map[string]stTensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("%s: reading the header size: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if n > 100<<20 || int64(n)+8 > st.Size() {
		return nil, fmt.Errorf("%s: a header of %d bytes in a file of %d", path, n, st.Size())
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", path, err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%s: parsing the header: %w", path, err)
	}
	out := map[string]stTensor{}
	for name, e := range entries {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			Dtype       string   `json:"dtype"`
			Shape       []int64  `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(e, &t); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
		if t.DataOffsets[0] < 0 || t.DataOffsets[1] < t.DataOffsets[0] || 8+int64(n)+t.DataOffsets[1] > st.Size() {
			return nil, fmt.Errorf("%s: tensor %s: bytes %v outside the file", path, name, t.DataOffsets)
		}
		out[name] = stTensor{Dtype: t.Dtype, Shape: t.Shape, Offsets: t.DataOffsets, file: path, base: 8 + int64(n)}
	}
	return out, nil
}

// writeSafetensors writes the tensors, in the order of names, into one safetensors file, their
// bytes copied from their files.
func writeSafetensors(ctx context.Context, path string, names []string, tensors map[string]stTensor, meta map[string]string) (err error) {
	header := map[string]any{"__metadata__": meta}
	var off int64
	for _, name := range names {
		t := tensors[name]
		n := t.Offsets[1] - t.Offsets[0]
		header[name] = map[string]any{"dtype": t.Dtype, "shape": t.Shape, "data_offsets": [2]int64{off, off + n}}
		off += n
	}
	raw, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(raw)%8 != 0 { // the data section starts 8-byte aligned
		raw = append(raw, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 4<<20)
	if err := binary.Write(w, binary.LittleEndian, uint64(len(raw))); err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	open := map[string]*os.File{}
	defer func() {
		for _, src := range open {
			src.Close()
		}
	}()
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := tensors[name]
		src := open[t.file]
		if src == nil {
			if src, err = os.Open(t.file); err != nil {
				return err
			}
			open[t.file] = src
		}
		n := t.Offsets[1] - t.Offsets[0]
		if _, err := io.Copy(w, io.NewSectionReader(src, t.base+t.Offsets[0], n)); err != nil {
			return fmt.Errorf("copying tensor %s: %w", name, err)
		}
	}
	return w.Flush()
}

// tokenizerLen is len(tokenizer) of a tokenizer.json: its distinct ids, the model's vocabulary
// and the added tokens.
func tokenizerLen(tok map[string]any) (int, error) {
	ids := map[int]bool{}
	model, _ := tok["model"].(map[string]any)
	vocab, _ := model["vocab"].(map[string]any)
	for _, v := range vocab {
		if id, ok := v.(float64); ok {
			ids[int(id)] = true
		}
	}
	added, _ := tok["added_tokens"].([]any)
	for _, a := range added {
		m, _ := a.(map[string]any)
		if id, ok := m["id"].(float64); ok {
			ids[int(id)] = true
		}
	}
	if len(vocab) == 0 {
		return 0, errors.New("tokenizer.json has no model.vocab")
	}
	return len(ids), nil
}

// convertLance writes into out a checkpoint directory in Iris's layout from Lance's release
// layout in from, as inference_lance.py builds the model for x2t:
//   - config.json: llm_config.json's keys with model_type lance, the tower's config.json as
//     vision_config (over any vision_config of llm_config.json), tie_word_embeddings false
//     (--tie_word_embeddings false), image_token_id = video_token_id (images are framed with
//     <|video_pad|>), and output_vocab_size = len(tokenizer) (validation_und_KVcache masks the
//     logits from there);
//   - model.safetensors: the understanding path: Lance_3B's language_model.* tensors without the
//     generation expert's (*_moe_gen), and the tower under vit_model. (vit.safetensors, with any
//     vit_model.* of Lance_3B's weights over it: the official load reads those last). Everything
//     else of Lance_3B's weights (the generation expert, the VAE bridges, timestep and position
//     embedders) is left out, and the metadata and progress say how many tensors and bytes;
//   - tokenizer.json and tokenizer_config.json from Lance_3B.
func convertLance(ctx context.Context, from, out string, progress io.Writer) error {
	llmDir, vitDir := filepath.Join(from, lanceLLMDir), filepath.Join(from, lanceViTDir)
	llm, err := readJSON(filepath.Join(llmDir, "llm_config.json"))
	if err != nil {
		return err
	}
	vit, err := readJSON(filepath.Join(vitDir, "config.json"))
	if err != nil {
		return err
	}
	tok, err := readJSON(filepath.Join(llmDir, "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("the Lance tokenizer (Iris reads tokenizer.json): %w", err)
	}
	n, err := tokenizerLen(tok)
	if err != nil {
		return err
	}
	cfg := maps.Clone(llm)
	vision, _ := llm["vision_config"].(map[string]any)
	vision = maps.Clone(vision)
	if vision == nil {
		vision = map[string]any{}
	}
	maps.Copy(vision, vit)
	video, ok := llm["video_token_id"]
	if !ok {
		video = 151656.0 // Qwen2.5-VL's <|video_pad|>
	}
	maps.Copy(cfg, map[string]any{
		"model_type": "lance", "architectures": []any{"Lance"}, "vision_config": vision,
		"tie_word_embeddings": false, "qk_norm": true, "image_token_id": video, "video_token_id": video,
		"output_vocab_size": n,
	})
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "config.json"), raw, 0o644); err != nil {
		return err
	}

	// The weights: model.safetensors, else ema.safetensors (init_from_model_path_if_needed).
	lw := filepath.Join(llmDir, "model.safetensors")
	if _, err := os.Stat(lw); err != nil {
		lw = filepath.Join(llmDir, "ema.safetensors")
	}
	lt, err := readSafetensorsHeader(lw)
	if err != nil {
		return fmt.Errorf("Lance's weights: %w", err)
	}
	vt, err := readSafetensorsHeader(filepath.Join(vitDir, "vit.safetensors"))
	if err != nil {
		return fmt.Errorf("the tower's weights: %w", err)
	}
	keep := map[string]stTensor{}
	var leftOut, leftBytes int64
	for name, t := range lt {
		switch {
		case strings.HasPrefix(name, "language_model.") && !strings.Contains(name, "_moe_gen"),
			strings.HasPrefix(name, "vit_model."):
			keep[name] = t
		default:
			leftOut++
			leftBytes += t.Offsets[1] - t.Offsets[0]
		}
	}
	for name, t := range vt {
		if _, over := keep["vit_model."+name]; !over {
			keep["vit_model."+name] = t
		}
	}
	names := slices.Collect(maps.Keys(keep))
	sort.Strings(names)
	note := fmt.Sprintf("Lance release: the understanding path (language_model.* without *_moe_gen, the tower as vit_model.*); left out: %d tensors, %d bytes (the generation expert, VAE bridges, embedders)", leftOut, leftBytes)
	if progress != nil {
		fmt.Fprintf(progress, "  %s\n", note)
	}
	if err := writeSafetensors(ctx, filepath.Join(out, "model.safetensors"), names, keep, map[string]string{"format": "pt", "iris": note}); err != nil {
		return fmt.Errorf("writing the understanding path's weights: %w", err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(llmDir, name))
		if err != nil {
			if name == "tokenizer_config.json" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
