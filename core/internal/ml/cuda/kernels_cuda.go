//go:build cuda

package cuda

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/kernels"
)

// kernelSet holds the kernels of kernels/iris.cu for one storage type.
type kernelSet struct {
	mod                               *gpu.Module
	bf16ToF32, f32ToBF16              *gpu.Function
	embed, embedBag                   *gpu.Function
	gather, scatter, scatterAdd       *gpu.Function
	rmsnorm, layernorm, headNorm      *gpu.Function
	bias, siluMul, gelu, geluTanh     *gpu.Function
	scaleCols                         *gpu.Function
	padRows, ropeRows, ropeKV         *gpu.Function
	softmax, attnPool                 *gpu.Function
	flash                             map[int]*gpu.Function // by head dim
	window                            map[int]*gpu.Function // by head dim; bf16 only
	mma                               map[int]*gpu.Function // by head dim; bf16 only
	mmaMask                           map[int]*gpu.Function // iris_attn_mma_mask, by head dim; bf16 only
	poolGQA                           map[int]*gpu.Function // by head dim; bf16 only
	poolGQAWhole                      map[int]*gpu.Function // by head dim; bf16 only
	argmax, argmaxPart, gemv, gemvGLU *gpu.Function
	moeRoute, moePlan, moeGemm        *gpu.Function
	moeCombine                        *gpu.Function
}

// flashHeadDims are the head sizes iris_attn_flash is instantiated for.
var flashHeadDims = []int{8, 16, 32, 64, 80, 128}

// windowHeadDims are those of iris_attn_window (tensor cores, bf16, segments of at most
// winMax rows).
var windowHeadDims = []int{16, 32, 64, 80}

// mmaHeadDims are those of iris_attn_mma and iris_attn_mma_mask (tensor cores, bf16): decoders'
// 128 and 64, vision towers' 80, 72 (1152-wide towers of 16 heads: held as 80, the padding
// zeros) and 64.
var mmaHeadDims = []int{64, 72, 80, 128}

// poolGQAHeadDims are those of iris_attn_pool_gqa (bf16, at most gqaMax query heads a KV head).
var poolGQAHeadDims = []int{64, 128}

func loadKernels(t dtype) (*kernelSet, error) {
	mod, err := gpu.LoadModule(kernels.Image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kernels.Source, err)
	}
	k := &kernelSet{mod: mod, flash: map[int]*gpu.Function{}, window: map[int]*gpu.Function{}, mma: map[int]*gpu.Function{},
		mmaMask: map[int]*gpu.Function{}, poolGQA: map[int]*gpu.Function{}, poolGQAWhole: map[int]*gpu.Function{}}
	sfx := "_f32"
	if t == bf16 {
		sfx = "_bf16"
	}
	var errs []error
	get := func(dst **gpu.Function, name string) {
		f, err := mod.Function(name)
		if err != nil {
			errs = append(errs, err)
		}
		*dst = f
	}
	get(&k.bf16ToF32, "iris_bf16_to_f32")
	get(&k.f32ToBF16, "iris_f32_to_bf16")
	get(&k.embed, "iris_embed"+sfx)
	get(&k.embedBag, "iris_embed_bag_add"+sfx)
	get(&k.gather, "iris_gather"+sfx)
	get(&k.scatter, "iris_scatter"+sfx)
	get(&k.scatterAdd, "iris_scatter_add"+sfx)
	get(&k.rmsnorm, "iris_rmsnorm"+sfx)
	get(&k.layernorm, "iris_layernorm"+sfx)
	get(&k.headNorm, "iris_head_norm"+sfx)
	get(&k.bias, "iris_bias"+sfx)
	get(&k.siluMul, "iris_silu_mul"+sfx)
	get(&k.padRows, "iris_pad_rows"+sfx)
	get(&k.gelu, "iris_gelu"+sfx)
	get(&k.geluTanh, "iris_gelu_tanh"+sfx)
	get(&k.scaleCols, "iris_scale_cols"+sfx)
	get(&k.ropeRows, "iris_rope_rows"+sfx)
	get(&k.ropeKV, "iris_rope_kv"+sfx)
	get(&k.softmax, "iris_softmax"+sfx)
	get(&k.attnPool, "iris_attn_pool"+sfx)
	get(&k.argmax, "iris_argmax_top2")
	get(&k.argmaxPart, "iris_argmax_part")
	get(&k.gemv, "iris_gemv"+sfx)
	get(&k.gemvGLU, "iris_gemv_glu"+sfx)
	get(&k.moeRoute, "iris_moe_route"+sfx)
	get(&k.moePlan, "iris_moe_plan")
	get(&k.moeGemm, "iris_moe_gemm"+sfx)
	get(&k.moeCombine, "iris_moe_combine"+sfx)
	for _, hd := range flashHeadDims {
		var f *gpu.Function
		get(&f, fmt.Sprintf("iris_attn_flash%s_%d", sfx, hd))
		k.flash[hd] = f
	}
	if t == bf16 {
		for _, hd := range windowHeadDims {
			var f *gpu.Function
			get(&f, fmt.Sprintf("iris_attn_window_bf16_%d", hd))
			k.window[hd] = f
		}
		for _, hd := range mmaHeadDims {
			var f *gpu.Function
			get(&f, fmt.Sprintf("iris_attn_mma_bf16_%d", hd))
			k.mma[hd] = f
			var m *gpu.Function
			get(&m, fmt.Sprintf("iris_attn_mma_mask_bf16_%d", hd))
			k.mmaMask[hd] = m
		}
		for _, hd := range poolGQAHeadDims {
			var f *gpu.Function
			get(&f, fmt.Sprintf("iris_attn_pool_gqa_bf16_%d", hd))
			k.poolGQA[hd] = f
			var w *gpu.Function
			get(&w, fmt.Sprintf("iris_attn_pool_gqa_whole_bf16_%d", hd))
			if w != nil {
				if err := w.SetMaxDynamicShared(gqaWholeSmem(hd)); err != nil {
					errs = append(errs, err)
				}
			}
			k.poolGQAWhole[hd] = w
		}
	}
	if len(errs) > 0 {
		_ = mod.Unload()
		return nil, fmt.Errorf("%s: %v", kernels.Source, errs)
	}
	return k, nil
}

// gqaWholeSmem is iris_attn_pool_gqa_whole's dynamic shared memory at head dim hd (iris.cu's
// gqa_whole_smem): the keys and values of gqaWhole rows, the query, p and score tiles, the sums.
func gqaWholeSmem(hd int) int {
	return 2*gqaWhole*(hd+8)*2 + gqaMax*(hd+8)*2 + gqaMax*(gqaWhole+8)*2 + gqaMax*(gqaWhole+1)*4 + gqaMax*4
}

// mmaGrid is iris_attn_mma's grid over segs segments of heads heads, the longest of longest
// queries: heads, segments, then query tiles (which the kernel takes longest first when causal).
func mmaGrid(longest, heads, segs int) gpu.Dim3 {
	return gpu.Dim3{X: heads, Y: segs, Z: (longest + mmaBQ - 1) / mmaBQ}
}

// Launch shapes shared with iris.cu.
const (
	attBQ      = 64  // ATT_BQ: queries per flash block (4 threads each)
	winMax     = 64  // WIN_MAX: rows of a segment iris_attn_window holds
	winThreads = 128 // WIN_THREADS: iris_attn_window's block
	mmaBQ      = 64  // MMA_BQ: queries per iris_attn_mma block (four warps of 16)
	mmaBK      = 64  // MMA_BK: keys per iris_attn_mma tile
	mmaThreads = 128
	gqaMax     = 16  // GQA_MAX: query heads a KV head iris_attn_pool_gqa serves
	decSK      = 64  // DEC_SK: keys per decode split
	gqaWhole   = 256 // GQA_WHOLE: the longest cache iris_attn_pool_gqa_whole takes
	decThreads = 256 // DEC_THREADS
	gemvWarps  = 4   // GEMV_WARPS: warps per gemv block (a row each)
	// gemvBlocksPerSM bounds the gemv grid to what stays resident (96 registers a thread), so
	// that warps stride over rows rather than waiting for a second wave.
	gemvBlocksPerSM = 4
	// the gemv's input row lives in the default 48 KiB of shared memory, beside the kernel's own
	// 144 bytes (block_sum's): an F32 row of 12,288 (an 8B decoder's down_proj) did not fit
	gemvMaxShared = 48<<10 - 256
	// headNormWarps are the heads of one iris_head_norm block (a warp each).
	headNormWarps = 4
	// argmaxParts are iris_argmax_part's blocks (of argmaxThreads): each leaves its chunk's
	// top two for iris_argmax_top2.
	argmaxParts   = 128
	argmaxThreads = 256
	// MoE launch shapes (iris.cu): the most experts a router block holds, the rows and columns
	// of a grouped-GEMM tile.
	moeMaxExperts = 256
	moeMaxTopK    = 16
	moeBM         = 64
	moeBN         = 64
)
