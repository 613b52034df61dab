package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// defaultProducts are the bf16 products of Qwen2.5-VL-3B at c=64 (5 images a tower pass, 5
// prompts with 54 decode rows a prefill pass, 54-row decode steps; 10 images a larger pass):
// the tower's qkv, proj, gate/up and down (K padded to 3,424) and its merger, the decoder's
// qkv, o, gate/up and down, and the lm_head of a decode step.
const defaultProducts = "3300:3840:1280,3300:1280:1280,3300:6840:1280,3300:1280:3424,825:5120:5120,825:2048:5120," +
	"6600:3840:1280,6600:1280:1280,6600:6840:1280,6600:1280:3424," +
	"1054:2560:2048,1054:2048:2048,1054:22016:2048,1054:2048:11008," +
	"2048:2560:2048,2048:2048:2048,2048:22016:2048,2048:2048:11008," +
	"54:2560:2048,54:2048:2048,54:22016:2048,54:2048:11008,54:151936:2048"

// products times cuBLASLt's candidates for product shapes: whether timing them (cuda.Options
// TuneProducts) can beat the heuristic's pick.
func products(args []string) error {
	fs := flag.NewFlagSet("products", flag.ContinueOnError)
	list := fs.String("shapes", defaultProducts, "products M:N:K, comma-separated")
	want := fs.Int("candidates", 16, "candidates timed a shape")
	runs := fs.Int("runs", 10, "timed runs a candidate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var shapes [][3]int
	for _, f := range strings.Split(*list, ",") {
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			return fmt.Errorf("-shapes %q: M:N:K", f)
		}
		var sh [3]int
		for i, p := range parts {
			v, err := strconv.Atoi(p)
			if err != nil || v <= 0 {
				return fmt.Errorf("-shapes %q: M:N:K of positive integers", f)
			}
			sh[i] = v
		}
		shapes = append(shapes, sh)
	}
	if *want < 1 || *runs < 1 {
		return fmt.Errorf("-candidates %d -runs %d: both at least 1", *want, *runs)
	}
	return timeProducts(shapes, *want, *runs)
}
