// Command abuse is a test plugin built with the SDK whose Plan misbehaves on request: the
// "mode" param picks an attack on the sandbox or a probe of it. Probes answer with a refusal
// whose code is "probe" and whose message is what the guest saw.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

type abuse struct{}

func (abuse) Describe() vlm.Description {
	return vlm.Description{
		Family: "abuse",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{{Name: "mode", Type: abi.ParamString, Default: "ok"}},
		Limits: vlm.Limits{MinImageTokens: 1, MaxImageTokens: 1},
	}
}

var hoard [][]byte

func (abuse) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	switch mode := params.String("mode"); mode {
	case "ok":
		return okPlan(img), nil
	case "loop":
		for {
		}
	case "alloc":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "panic":
		panic("boom")
	case "exit":
		os.Exit(3)
		return vlm.Plan{}, nil
	case "recurse":
		return vlm.Plan{}, fmt.Errorf("%d", recurse(1))
	case "file":
		var seen []string
		for _, p := range []string{"/etc/passwd", "/", ".", "/proc/self/environ"} {
			_, err := os.ReadFile(p)
			seen = append(seen, fmt.Sprintf("%s: %v", p, err != nil))
		}
		_, err := os.Create("/tmp/iris-escape")
		seen = append(seen, fmt.Sprintf("create: %v", err != nil))
		return vlm.Plan{}, vlm.Refuse("probe", "%s", strings.Join(seen, "; "))
	case "socket":
		return vlm.Plan{}, vlm.Refuse("probe", "%s", sockets())
	case "env":
		return vlm.Plan{}, vlm.Refuse("probe", "args=%q env=%q", os.Args, os.Environ())
	case "clock":
		t0 := time.Now()
		time.Sleep(10 * time.Millisecond) // the fake monotonic clock advances 1 ms per reading
		return vlm.Plan{}, vlm.Refuse("probe", "%d", t0.Unix())
	case "random":
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return vlm.Plan{}, vlm.Refuse("probe", "%s", hex.EncodeToString(b))
	case "bad_plan":
		p := okPlan(img)
		p.ImageTokens++
		return p, nil
	default:
		return vlm.Plan{}, fmt.Errorf("unknown mode %q", mode)
	}
}

//go:noinline
func recurse(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	return recurse(n+1) + int(pad[0])
}

func okPlan(img vlm.ImageHeader) vlm.Plan {
	return vlm.Plan{
		Source: vlm.Size{Width: img.Width, Height: img.Height},
		Resize: &vlm.Resize{Width: 28, Height: 28, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true},
		Normalize: vlm.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
			Flavor: abi.FlavorTorchvision},
		Patches:     vlm.Patches{Size: 14, Temporal: 2, Merge: 2, Layout: abi.LayoutMergeBlocks},
		Grid:        vlm.Grid{T: 1, H: 2, W: 2},
		LLMGrid:     vlm.Grid{T: 1, H: 1, W: 1},
		ImageTokens: 1,
	}
}

func (abuse) Frame(req vlm.FrameRequest, _ vlm.Params) (vlm.Frame, error) {
	return vlm.Frame{
		Before:       "<|im_start|>user\n",
		Span:         vlm.ImageSpan{Pad: "<|image_pad|>", Count: req.Plan.ImageTokens},
		After:        req.Question + "<|im_end|>\n<|im_start|>assistant\n",
		StopTokenIDs: []int32{151645},
	}, nil
}

func init() { vlm.Register(abuse{}) }

func main() {}
