"""Compiles quack's GEMM for the H200 (sm_90a) on a machine without a GPU, in several products
and tile configurations, and exports them as C headers and objects behind one dispatch header:
the fused SwiGLU of the throughput work (docs/gpu.md; measured 2026-12-03, docs/results), linked into
builds with the quack tag.

The products are quack's GEMM (quack-kernels: CuTe DSL, wgmma and TMA, a persistent tile
scheduler): the gate/up product with the gate and up weights one after the other as Iris binds
them ([gate; up] rows, quack's concat_layout) and an activation that rounds where transformers'
bf16 MLP rounds,

    act = bf16(bf16(silu(bf16(x Wg^T + bg))) * bf16(x Wu^T + bu))

(the biases, when a variant has them, as an f32 row vector added to the f32 accumulators), and a
plain product y = bf16(x W^T + b) (Options.QuackLinear's experiment). quack compiles against fake
tensors with symbolic M, N and K, so one kernel serves every shape. Its own entry takes named
tuples, which the C export cannot express; a flat entry (A, B, the output, the biases, the
persistent scheduler's cluster count, a stream) wraps it.

    scripts/gpu/swiglu-gemm/setup.sh
    .build/swiglu-gemm-venv/bin/python scripts/gpu/swiglu-gemm/export.py --out .build/swiglu-gemm

writes a header and an object a variant (the host launcher with the cubin inside; it calls the
CUDA runtime's library API through the static runtime libcuda_dialect_runtime_static.a of
nvidia-cutlass-dsl's cu13 package, copied beside them), libswiglu_gemm.a of the objects,
swiglu_variants.h (the variants by index behind iris_swiglu_load and iris_swiglu_launch) and each
kernel's PTX under --out/ptx. core/internal/ml/cuda/gpu links them in builds with the quack tag
(gpu.QuackGemm).
"""

import argparse
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys

os.environ.setdefault("QUACK_ARCH", "sm_90")  # quack's switch for compiling without a GPU

import torch  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import cutlass.cute.runtime as cute_runtime  # noqa: E402
import cuda.bindings.driver as cuda  # noqa: E402
from cutlass import BFloat16, Float32, const_expr  # noqa: E402
from cutlass.cutlass_dsl import dsl_user_op  # noqa: E402

import quack.activation as qact  # noqa: E402
import quack.cute_dsl_utils as qutils  # noqa: E402
import quack.gemm_runtime.host as qhost  # noqa: E402
import quack.gemm_tvm_ffi_utils as qffi  # noqa: E402
from quack.epilogue.library import linear_act_mod  # noqa: E402


def _rb(x):
    """x rounded to bf16 and back to f32."""
    return x.to(BFloat16).to(Float32)


@dsl_user_op
def swiglu_hf(x, y, *, loc=None, ip=None):
    """transformers' bf16 SwiGLU from the f32 accumulators x (gate) and y (up); the product is
    rounded to bf16 by the store."""
    if const_expr(not isinstance(x, tuple)):
        g = _rb(x)
        return _rb(g * qact.sigmoid(g, loc=loc, ip=ip)) * _rb(y)
    return (swiglu_hf(x[0], y[0], loc=loc, ip=ip), swiglu_hf(x[1], y[1], loc=loc, ip=ip))


def quack_gemm_args(v):
    """The arguments quack's own compile gets for variant v's GEMM (its gemm object, fake
    tensors, epilogue and scheduler arguments), caught at its cute.compile instead of compiling
    there."""
    qact.gate_fn_map["swiglu_hf"] = swiglu_hf
    caught = []

    class Caught(Exception):
        pass

    def catch(*args, **kwargs):
        caught.append(args)
        raise Caught

    qffi.cute.compile, orig = catch, qffi.cute.compile
    qutils.get_max_active_clusters = qhost.get_max_active_clusters = lambda *a, **k: 1
    try:
        gated = v.op == "swiglu"
        mod = linear_act_mod("swiglu_hf" if gated else None, gated=gated, has_c=False, has_rowvec=v.bias, has_colvec=False)
        M, K, I = 256, 256, 256  # metadata only: the compiled shapes are symbolic
        a = torch.empty(M, K, dtype=torch.bfloat16)
        w = torch.empty(2 * I, K, dtype=torch.bfloat16)  # [gate; up] rows, or a linear's 2I
        out = torch.empty(M, I if gated else 2 * I, dtype=torch.bfloat16)
        epi, concat = {"mAuxOut": out}, ("B",) if gated else ()
        if v.bias:
            # in f32: a gated product's [gate bias; up bias] takes the weights' concat relabel as
            # a 32-bit row vector (a 16-bit one quack would want interleaved)
            epi["mRowVecBroadcast"] = torch.empty(1, 2 * I, dtype=torch.float32)
            if gated:
                concat += ("mRowVecBroadcast",)
        try:
            mod.gemm(a, w, None, epi_args=epi, tile_M=v.tile_m, tile_N=v.tile_n, cluster_M=v.cluster_m,
                     cluster_N=v.cluster_n, pingpong=v.pingpong, concat_layout=concat or None, _launch=False)
        except Caught:
            pass
    finally:
        qffi.cute.compile = orig
    if not caught:
        sys.exit(f"export: quack compiled nothing for {v.name}")
    return caught[-1]


class Variant:
    """A product (op "swiglu": the gate/up product with SwiGLU; "linear": a plain product, its
    bias too) in a tile configuration: "pp" (pingpong: the two consumer warp groups take turns,
    one's epilogue under the other's products) or "coop" (both on one tile), tile MxN, cluster
    MxN; e.g. pp:128x192:2x1, quack's default for the H100."""

    def __init__(self, op, spec, bias):
        try:
            kind, tile, cluster = spec.split(":")
            self.tile_m, self.tile_n = map(int, tile.split("x"))
            self.cluster_m, self.cluster_n = map(int, cluster.split("x"))
        except ValueError:
            sys.exit(f"export: variant {spec!r}: want pp|coop:<tile M>x<tile N>:<cluster M>x<cluster N>")
        if kind not in ("pp", "coop"):
            sys.exit(f"export: variant {spec!r}: kind pp or coop")
        self.op, self.spec, self.pingpong, self.bias = op, spec, kind == "pp", bias
        self.name = f"{op}_gemm_{'bias_' if bias else ''}{kind}{self.tile_m}x{self.tile_n}c{self.cluster_m}x{self.cluster_n}"


# The variants built by default, the first of each list the product Options.QuackSwiGLU runs
# unless told otherwise: from quack's H100 search space for gated products
# (gemm_config._get_sm90_configs). Without biases (the decoder's prefill), then with them (the
# tower's MLP); on the H200 (2026-12-03, docs/results) pp:128x192:2x1 made a 10-prompt
# prefill's 1850x22016x2048 product 1.18x cuBLASLt + iris_silu_mul, pp:128x128:2x1 the tower's
# 3300x6840x1280 with biases 1.45x.
DEFAULT_VARIANTS = "pp:128x192:2x1,pp:128x128:2x1,pp:128x192:1x2,coop:256x192:2x1,coop:128x256:2x1"
DEFAULT_BIAS_VARIANTS = "pp:128x128:2x1,pp:128x192:2x1,pp:128x128:1x2"
# Plain products (Options.QuackLinear), without and with biases: candidates for the narrow
# products of a pass (N of 1,280 to 3,840), where cuBLASLt made 440-630 TFLOP/s.
DEFAULT_LINEAR_VARIANTS = "pp:128x128:2x1,pp:128x192:2x1,coop:256x128:2x1,pp:128x128:1x2"
DEFAULT_LINEAR_BIAS_VARIANTS = DEFAULT_LINEAR_VARIANTS


def export(v, out):
    """Compiles variant v and exports it as out/<v.name>.h and .o; returns the header's text."""
    gemm, mA, mB, _mD, _mC, epi, sched, _varlen, _stream, _sfa, _sfb = quack_gemm_args(v)
    Epi, Sched, raster = type(epi), type(sched), sched.raster_order

    def sched_args(clusters):
        return Sched(max_active_clusters=clusters, raster_order=raster, max_swizzle_size=cutlass.Int32(8),
                     tile_count_semaphore=None, batch_idx_permute=None, ag=None)

    @cute.jit
    def swiglu_gemm(mA: cute.Tensor, mB: cute.Tensor, mAct: cute.Tensor, clusters: cutlass.Int32, stream: cuda.CUstream):
        e = Epi(mAuxOut=mAct, split_k_semaphore=None, split_k_workspace=None)
        gemm(mA, mB, None, None, e, sched_args(clusters), None, stream, None, None)

    @cute.jit
    def swiglu_gemm_bias(mA: cute.Tensor, mB: cute.Tensor, mAct: cute.Tensor, mBias: cute.Tensor, clusters: cutlass.Int32,
                         stream: cuda.CUstream):
        e = Epi(mAuxOut=mAct, mRowVecBroadcast=mBias, split_k_semaphore=None, split_k_workspace=None)
        gemm(mA, mB, None, None, e, sched_args(clusters), None, stream, None, None)

    (out / "ptx" / v.name).mkdir(parents=True, exist_ok=True)
    opts = f"--gpu-arch sm_90a --keep-ptx --dump-dir {out / 'ptx' / v.name}"
    if v.bias:
        compiled = cute.compile(swiglu_gemm_bias, mA, mB, epi.mAuxOut, epi.mRowVecBroadcast, cutlass.Int32(1),
                                cute_runtime.make_fake_stream(), options=opts)
    else:
        compiled = cute.compile(swiglu_gemm, mA, mB, epi.mAuxOut, cutlass.Int32(1), cute_runtime.make_fake_stream(),
                                options=opts)
    compiled.export_to_c(str(out), v.name)
    return (out / f"{v.name}.h").read_text()


DISPATCH_HEAD = """// Generated by scripts/gpu/swiglu-gemm/export.py: the exported variants of the SwiGLU product
// behind one interface (core/internal/ml/cuda/gpu/swiglu_quack_cuda.go).
#pragma once
"""


def dispatch(variants, headers):
    """C that loads and launches variant i of variants (their exported headers' entry points)."""
    c = [DISPATCH_HEAD]
    c += [f'#include "{v.name}.h"' for v in variants]
    c.append(f"\n#define IRIS_SWIGLU_VARIANTS {len(variants)}")
    names = ", ".join(f'"{v.spec}"' for v in variants)
    c.append(f"static const char *iris_swiglu_specs[] = {{{names}}};")
    ctas = ", ".join(str(v.cluster_m * v.cluster_n) for v in variants)
    c.append(f"static const int iris_swiglu_cluster_ctas[] = {{{ctas}}};")
    bias = ", ".join(str(int(v.bias)) for v in variants)
    c.append(f"static const int iris_swiglu_bias[] = {{{bias}}};")
    ops = ", ".join(str(int(v.op == "linear")) for v in variants)
    c.append(f"static const int iris_swiglu_linear[] = {{{ops}}};  // 1: a plain product")
    c.append("""
// iris_swiglu_load loads variant i onto the current device into *lib, errors returned, not printed.
static cudaError_t iris_swiglu_load(int i, cudaLibrary_t *lib) {
\tcudaError_t ret = cudaSuccess;
\tint dev = 0;
\tstruct { cudaLibrary_t **lib; cudaError_t *ret; } init = {&lib, &ret};
\tstruct { cudaLibrary_t **lib; int32_t *dev; cudaError_t *ret; } load = {&lib, &dev, &ret};
\tif ((ret = cudaGetDevice(&dev)) != cudaSuccess) return ret;
\tswitch (i) {""")
    for i, v in enumerate(variants):
        c.append(f"\tcase {i}: _mlir_{v.name}_cuda_init((void **)&init); if (ret == cudaSuccess) _mlir_{v.name}_cuda_load_to_device((void **)&load); return ret;")
    c.append("\t}\n\treturn cudaErrorInvalidValue;\n}")
    c.append("""
// iris_swiglu_tensor is every variant's tensor argument: data, two dynamic shapes, a row stride.
typedef struct { void *data; int32_t shapes[2]; int64_t strides[1]; } iris_swiglu_tensor;

// iris_swiglu_launch launches variant i: act = swiglu(x w^T + bias) over clusters persistent
// clusters (bias, [1, 2I] f32, only for the variants with iris_swiglu_bias[i]).
static int32_t iris_swiglu_launch(int i, iris_swiglu_tensor *x, iris_swiglu_tensor *w, iris_swiglu_tensor *act,
                                  iris_swiglu_tensor *bias, int32_t clusters, cudaStream_t stream) {
\tint32_t ret = 0;
\tvoid *args[6] = {x, w, act, &clusters, &stream, &ret};
\tvoid *bargs[7] = {x, w, act, bias, &clusters, &stream, &ret};
\tswitch (i) {""")
    for i, (v, h) in enumerate(zip(variants, headers)):
        entry = re.search(r"void (_mlir_" + re.escape(v.name) + r"__mlir_ciface_\w+)\(void \*\*args", h)
        if not entry:
            sys.exit(f"export: no entry point in {v.name}.h")
        args = "bargs, 7" if v.bias else "args, 6"
        c.append(f"\tcase {i}: {entry.group(1)}({args}); return ret;")
    c.append("\t}\n\treturn -1;\n}")
    return "\n".join(c) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the headers, libswiglu_gemm.a and ptx/")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="without biases: comma-separated pp|coop:<tile M>x<tile N>:<cluster M>x<cluster N>, the default first")
    p.add_argument("--bias-variants", default=DEFAULT_BIAS_VARIANTS, help="with f32 biases: the same")
    p.add_argument("--linear-variants", default=DEFAULT_LINEAR_VARIANTS, help="plain products: the same")
    p.add_argument("--linear-bias-variants", default=DEFAULT_LINEAR_BIAS_VARIANTS, help="plain products with f32 biases")
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the export links the host launcher in-process first: the runtime's symbols must resolve
    libs = pathlib.Path(cutlass.__file__).parents[2] / "cu13" / "lib"
    ctypes.CDLL(str(libs / "libcute_dsl_runtime.so"), mode=ctypes.RTLD_GLOBAL)
    variants = []
    for op, bias, specs in (("swiglu", False, args.variants), ("swiglu", True, args.bias_variants),
                            ("linear", False, args.linear_variants), ("linear", True, args.linear_bias_variants)):
        variants += [Variant(op, s, bias) for s in specs.split(",") if s]
    headers = []
    for i, v in enumerate(variants):
        print(f"export: [{i + 1}/{len(variants)}] {v.op} {v.spec}{' with biases' if v.bias else ''} -> {v.name}",
              file=sys.stderr, flush=True)
        headers.append(export(v, out))
    (out / "swiglu_variants.h").write_text(dispatch(variants, headers))
    lib = out / "libswiglu_gemm.a"
    lib.unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", str(lib)] + [str(out / f"{v.name}.o") for v in variants], check=True)
    # the launchers' runtime, beside them for core/internal/ml/cuda/gpu's cgo (the quack build tag)
    shutil.copy(libs / "libcuda_dialect_runtime_static.a", out)
    print(f"export: {out}/swiglu_variants.h, libswiglu_gemm.a ({len(variants)} variants), "
          "libcuda_dialect_runtime_static.a", file=sys.stderr)


if __name__ == "__main__":
    main()
