// Command gpucheck runs the CUDA engine's full-size checks on a GPU machine
// (scripts/gpu/run.sh calls it; see docs/gpu.md):
//
//	gpucheck parity -model DIR -cases DIR -ref ref.json [-new 32] [-precision fp32,bf16] [-out parity.json]
//	gpucheck bench  -model DIR -cases DIR -case NAME [-precision bf16] [-runs 30] [-out bench.json]
//	gpucheck passes -model DIR -cases DIR [-case NAME] [-images 1,2,4] [-prompts 1,4] [-decodes 1,16,64]
//	gpucheck products [-shapes M:N:K,...] [-candidates 16] [-runs 10]
//
// The checkpoint may be of any family the engine runs (models.Load reads its model_type). parity
// feeds the case files of scripts/reference/gpu_parity.py (processor outputs: the prompt's ids
// as the family's chat template framed it, the pixel rows, the grid) to the engine in fp32 and
// bf16 and compares its greedy tokens with transformers'. bench times the
// engine on one case: latency at 3 and 10 new tokens (p50, p95, TTFT, TPOT), images/s at several
// concurrencies, and the GPU time per stage. passes times one
// batched pass of each kind and size (vision, prefill, decode) and scheduler-like rounds; products times
// cuBLASLt's candidate algorithms for product shapes against the heuristic's pick. The same figures over HTTP, from a running `iris
// serve`, come from benchmark/cmd/httpbench (core speaks no HTTP).
//
// -backend cuda (the default) needs the cuda tag; -backend cpu runs the same checks on the native
// backend in fp32, in either build: the dry run of the GPU pipeline on a machine without a GPU
// (scripts/gpu/run.sh with IRIS_CPU=1).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
}
