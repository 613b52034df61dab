// Command gpucheck runs the CUDA engine's full-size checks on a GPU machine
// (scripts/gpu/run.sh calls it; see docs/gpu.md):
//
//	gpucheck parity -model DIR -cases DIR -ref ref.json [-new 32] [-out parity.json]
//	gpucheck bench  -model DIR -cases DIR -case NAME [-precision bf16] [-runs 30] [-out bench.json]
//	gpucheck http   -url http://127.0.0.1:PORT -model NAME -image FILE.png -question TEXT [-out http.json]
//
// parity feeds the case files of scripts/reference/gpu_parity.py (processor outputs) to the
// engine in fp32 and bf16 and compares its greedy tokens with transformers'. bench times the
// engine on one case: latency at 3 and 10 new tokens (p50, p95, TTFT, TPOT), images/s at several
// concurrencies, and the GPU time per stage. http drives a running `iris serve` over loopback with
// OpenAI chat requests (streamed, ignore_eos) and reports the same latency and throughput figures.
//
// It is built only with the cuda tag; without it, it says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "http" {
		err = httpBench(os.Args[2:])
	} else {
		err = run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
}
