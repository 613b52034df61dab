package deepseekocr2

import (
	"fmt"
	"regexp"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// layout is where a checkpoint keeps the family's tensors: transformers 5's names
// (deepseek-community/DeepSeek-OCR-2, what save_pretrained writes), or the original release's
// (deepseek-ai/DeepSeek-OCR-2's remote code: sam_model, qwen2_model, projector, the separator,
// the decoder under model., each routed expert a module of its own), which transformers 5.17
// converts on load with the renames of conversion_mapping.py's "deepseek_ocr2" entry; name
// applies their inverse to a transformers name.
type layout struct {
	original                         bool
	tower, projector, root, text, lm []string
}

var (
	hfLayout = layout{tower: towerPrefixes, projector: projectorPrefixes, root: rootPrefixes, text: textPrefixes, lm: lmPrefixes}
	// the original layout: everything under model. but lm_head
	originalLayout = layout{original: true, tower: []string{"model.", ""}, projector: []string{"model.projector.layers.", "projector.layers."},
		root: []string{"model.", ""}, text: []string{"model.", ""}, lm: lmPrefixes}
)

// detectLayout tells the layouts apart by SAM's position table.
func detectLayout(ld *ml.Loader) layout {
	if ld.Has(originalLayout.tower, "sam_model.pos_embed") {
		return originalLayout
	}
	return hfLayout
}

// towerRenames are conversion_mapping.py's renames of the tower, transformers name first.
var towerRenames = []struct {
	hf   *regexp.Regexp
	orig string
}{
	{regexp.MustCompile(`^sam_encoder\.layers\.(\d+)\.layer_norm1\.`), "sam_model.blocks.$1.norm1."},
	{regexp.MustCompile(`^sam_encoder\.layers\.(\d+)\.layer_norm2\.`), "sam_model.blocks.$1.norm2."},
	{regexp.MustCompile(`^sam_encoder\.layers\.(\d+)\.attn\.`), "sam_model.blocks.$1.attn."},
	{regexp.MustCompile(`^sam_encoder\.layers\.(\d+)\.mlp\.`), "sam_model.blocks.$1.mlp."},
	{regexp.MustCompile(`^sam_encoder\.patch_embed\.projection\.`), "sam_model.patch_embed.proj."},
	{regexp.MustCompile(`^sam_encoder\.pos_embed$`), "sam_model.pos_embed"},
	{regexp.MustCompile(`^sam_encoder\.neck\.conv1\.`), "sam_model.neck.0."},
	{regexp.MustCompile(`^sam_encoder\.neck\.layer_norm1\.`), "sam_model.neck.1."},
	{regexp.MustCompile(`^sam_encoder\.neck\.conv2\.`), "sam_model.neck.2."},
	{regexp.MustCompile(`^sam_encoder\.neck\.layer_norm2\.`), "sam_model.neck.3."},
	{regexp.MustCompile(`^sam_encoder\.proj\.conv1\.`), "sam_model.net_2."},
	{regexp.MustCompile(`^sam_encoder\.proj\.conv2\.`), "sam_model.net_3."},
	{regexp.MustCompile(`^vision_encoder\.layers\.`), "qwen2_model.model.model.layers."},
	{regexp.MustCompile(`^vision_encoder\.norm\.`), "qwen2_model.model.model.norm."},
	{regexp.MustCompile(`^query_768_resolution\.`), "qwen2_model.query_768."},
	{regexp.MustCompile(`^query_1024_resolution\.`), "qwen2_model.query_1024."},
}

// name is a tower tensor's name in the layout (under its tower prefixes).
func (l layout) name(hf string) string {
	if !l.original {
		return hf
	}
	for _, r := range towerRenames {
		if r.hf.MatchString(hf) {
			return r.hf.ReplaceAllString(hf, r.orig)
		}
	}
	return hf
}

// separator is the view separator's name (the original release misspells it).
func (l layout) separator() string {
	if l.original {
		return "view_seperator" //nolint:misspell // the original release's tensor name
	}
	return "view_separator"
}

// experts binds layer p's routed experts' gate/up and down projections as stacked matrices:
// transformers' gate_up_proj [E, 2I, H] and down_proj [E, H, I], or the original's modules
// (mlp.experts.E.{gate,up,down}_proj.weight), joined in the same order (expert e's gate rows,
// then its up rows; MergeModulelist then Concatenate(dim=1), as the conversion does).
func (l layout) experts(ld *ml.Loader, p string, experts, inter, hidden int) (gateUp, down ml.Tensor) {
	if !l.original {
		gateUp = ld.Matrix(l.text, p+"mlp.experts.gate_up_proj", experts, 2*inter*hidden).Reshape(experts*2*inter, hidden)
		down = ld.Matrix(l.text, p+"mlp.experts.down_proj", experts, hidden*inter).Reshape(experts*hidden, inter)
		return gateUp, down
	}
	var gu, d []string
	for e := range experts {
		q := fmt.Sprintf("%smlp.experts.%d.", p, e)
		gu = append(gu, q+"gate_proj.weight", q+"up_proj.weight")
		d = append(d, q+"down_proj.weight")
	}
	g := ld.Matrices(l.text, gu, inter, hidden)
	dd := ld.Matrices(l.text, d, hidden, inter)
	if ld.Err() != nil {
		return ml.Tensor{}, ml.Tensor{}
	}
	// the views' base: Matrices binds the tensors as one, each a view of its rows
	gateUp, down = g[0], dd[0]
	gateUp.Rows, down.Rows = experts*2*inter, experts*hidden
	return gateUp, down
}
