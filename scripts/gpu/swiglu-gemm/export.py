"""Compiles a SwiGLU-fused gate/up product for the H200 (sm_90a) on a machine without a GPU and
exports it as a C header and an object file: an experiment for issue 14 (docs/gpu.md,
nineteenth session, "What stands between 235 and 250 images/s"). Nothing in Iris links it yet.

The kernel is quack's gated GEMM (quack-kernels: CuTe DSL, wgmma and TMA, a persistent tile
scheduler) with the gate and up weights one after the other as Iris binds them ([gate; up] rows,
quack's concat_layout) and an activation that rounds where transformers' bf16 MLP rounds:

    act = bf16(bf16(silu(bf16(x Wg^T))) * bf16(x Wu^T))

quack compiles against fake tensors with symbolic M, N and K, so one kernel serves every shape.
Its own entry takes named tuples, which the C export cannot express; a flat entry (A, B, the
activation's output, the persistent scheduler's cluster count, a stream) wraps it.

    scripts/gpu/swiglu-gemm/setup.sh
    .build/swiglu-gemm-venv/bin/python scripts/gpu/swiglu-gemm/export.py --out .build/swiglu-gemm

writes swiglu_gemm.h and swiglu_gemm.o (the host launcher with the cubin inside; it calls the
CUDA runtime's library API through the static runtime libcuda_dialect_runtime_static.a of
nvidia-cutlass-dsl's cu13 package, copied beside them), and the kernel's PTX under --out/ptx.
core/internal/gpu links them in builds with the quack tag (gpu.SwiGLUGemm).
"""

import argparse
import ctypes
import os
import pathlib
import shutil
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


def quack_gemm_args(tile_m, tile_n):
    """The arguments quack's own compile gets for the gated GEMM (its gemm object, fake tensors,
    epilogue and scheduler arguments), caught at its cute.compile instead of compiling there."""
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
        mod = linear_act_mod("swiglu_hf", gated=True, has_c=False, has_rowvec=False, has_colvec=False)
        M, K, I = 256, 256, 256  # metadata only: the compiled shapes are symbolic
        a = torch.empty(M, K, dtype=torch.bfloat16)
        w = torch.empty(2 * I, K, dtype=torch.bfloat16)  # [gate; up] rows
        act = torch.empty(M, I, dtype=torch.bfloat16)
        try:
            mod.gemm(a, w, None, epi_args={"mAuxOut": act}, tile_M=tile_m, tile_N=tile_n, cluster_M=1, cluster_N=1,
                     concat_layout=("B",), _launch=False)
        except Caught:
            pass
    finally:
        qffi.cute.compile = orig
    if not caught:
        sys.exit("export: quack compiled nothing")
    return caught[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for swiglu_gemm.h, swiglu_gemm.o and ptx/")
    p.add_argument("--tile-m", type=int, default=128)
    p.add_argument("--tile-n", type=int, default=192, help="output columns of a tile, gate and up together")
    args = p.parse_args()
    out = pathlib.Path(args.out)
    (out / "ptx").mkdir(parents=True, exist_ok=True)

    gemm, mA, mB, _mD, _mC, epi, sched, _varlen, _stream, _sfa, _sfb = quack_gemm_args(args.tile_m, args.tile_n)
    Epi, Sched, raster = type(epi), type(sched), sched.raster_order

    @cute.jit
    def swiglu_gemm(mA: cute.Tensor, mB: cute.Tensor, mAct: cute.Tensor, clusters: cutlass.Int32, stream: cuda.CUstream):
        e = Epi(mAuxOut=mAct, split_k_semaphore=None, split_k_workspace=None)
        s = Sched(max_active_clusters=clusters, raster_order=raster, max_swizzle_size=cutlass.Int32(8),
                  tile_count_semaphore=None, batch_idx_permute=None, ag=None)
        gemm(mA, mB, None, None, e, s, None, stream, None, None)

    compiled = cute.compile(swiglu_gemm, mA, mB, epi.mAuxOut, cutlass.Int32(1), cute_runtime.make_fake_stream(),
                            options=f"--gpu-arch sm_90a --keep-ptx --dump-dir {out / 'ptx'}")
    # the export links the host launcher in-process first: the runtime's symbols must resolve
    libs = pathlib.Path(cutlass.__file__).parents[2] / "cu13" / "lib"
    ctypes.CDLL(str(libs / "libcute_dsl_runtime.so"), mode=ctypes.RTLD_GLOBAL)
    compiled.export_to_c(str(out), "swiglu_gemm")
    # the launcher's runtime, beside it for core/internal/gpu's cgo (the quack build tag)
    shutil.copy(libs / "libcuda_dialect_runtime_static.a", out)
    print(f"export: {out}/swiglu_gemm.h, swiglu_gemm.o, libcuda_dialect_runtime_static.a", file=sys.stderr)


if __name__ == "__main__":
    main()
