// Command httpbench drives a running OpenAI-compatible chat server (`iris serve` in the GPU speed
// runs: scripts/gpu/run.sh, docs/gpu.md) over HTTP with streamed one-image requests
// (ignore_eos) and reports latency at 3 and 10 new tokens (p50, p95, TTFT, TPOT), the server's
// own stage timings (p50 of the iris extension's timings_ms), and images/s with p50/p95 latency
// and TTFT of 10-token answers at several concurrencies in a closed loop (images/s over the whole
// run, and steady: the answers between -warmup and -seconds over that window). Every request sends a
// distinct image (-distinct variants of FILE, one pixel apart, re-encoded), so neither an
// embedding cache nor anything keyed on the bytes sees a repeat:
//
//	httpbench -url http://127.0.0.1:PORT -model NAME -image FILE -question TEXT [-runs 30] [-concurrency 1,8,32,64,128] [-seconds 5] [-warmup 1] [-distinct 512] [-out http.json]
//
// It lives outside core, which speaks no HTTP; `iris profile` is the AIPerf-compatible profiler,
// this is the short fixed-shape run whose figures docs/gpu.md and docs/results compare across builds.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iris-vlm/iris/benchmark/sse"
	"github.com/iris-vlm/iris/internal/speed"
)

// httpResult is one streamed chat completion as the client saw it: the time to the first chunk
// with text, the total time, and the completion tokens the usage chunk reports.
type httpResult struct {
	total, ttft time.Duration
	chunks      int
	tokens      int
	// stages are the server's own stage timings (the iris extension of the finish chunk).
	stages map[string]float64
}

func chatOnce(ctx context.Context, client *http.Client, url string, body []byte) (httpResult, error) {
	var r httpResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return r, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	rd := sse.NewReader(resp.Body)
	for {
		msg, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r, err
		}
		event, data := sse.Data(msg)
		if event == "error" {
			return r, fmt.Errorf("the server's stream failed: %s", data)
		}
		if data == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Iris *struct {
				TimingsMS map[string]float64 `json:"timings_ms"`
			} `json:"iris"`
		}
		if json.Unmarshal([]byte(data), &chunk) != nil {
			continue
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != nil && *chunk.Choices[0].Delta.Content != "" {
			if r.chunks == 0 {
				r.ttft = time.Since(start)
			}
			r.chunks++
		}
		if chunk.Usage != nil {
			r.tokens = chunk.Usage.CompletionTokens
		}
		if chunk.Iris != nil {
			r.stages = chunk.Iris.TimingsMS
		}
	}
	r.total = time.Since(start)
	return r, nil
}

func main() {
	if err := httpBench(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "httpbench:", err)
		os.Exit(1)
	}
}

// tokenCounts parses -tokens: answer lengths of at least 2 tokens (TPOT needs a second token).
func tokenCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("-tokens %q: each a count of at least 2", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func httpBench(args []string) error {
	fs := flag.NewFlagSet("httpbench", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "server base URL")
	model := fs.String("model", "", "model name")
	image := fs.String("image", "", "PNG or JPEG file to send")
	question := fs.String("question", "Describe the picture.", "question")
	runs := fs.Int("runs", 30, "requests per latency figure (0: no c=1 latency figures)")
	conc := fs.String("concurrency", "1,8,32,64,128", "concurrencies for images/s (\"\": none)")
	lengths := fs.String("tokens", "3,10", "answer lengths of the c=1 latency figures (a profile's own workload: 300 for OCR, 32 for grounding)")
	distinct := fs.Int("distinct", 512, "distinct variants of the image, sent in turn (1: the file itself every time)")
	secs := fs.Float64("seconds", 5, "seconds per throughput figure")
	warm := fs.Float64("warmup", 1, "seconds of each level before its steady images/s (the answers after them, up to -seconds, over that window)")
	out := fs.String("out", "", "write results as JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	img, err := os.ReadFile(*image)
	if err != nil {
		return err
	}
	variants, err := variantsOf(img, *distinct)
	if err != nil {
		return fmt.Errorf("image variants: %w", err)
	}
	urls := make([]string, len(variants))
	for i, v := range variants {
		urls[i] = "data:" + http.DetectContentType(v) + ";base64," + base64.StdEncoding.EncodeToString(v)
	}
	var sent atomic.Int64
	body := func(n int) []byte {
		dataURL := urls[int(sent.Add(1)-1)%len(urls)]
		b, _ := json.Marshal(map[string]any{
			"model": *model, "stream": true, "max_tokens": n, "temperature": 0, "ignore_eos": true,
			"stream_options": map[string]bool{"include_usage": true},
			"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "image_url", "image_url": map[string]string{"url": dataURL}},
				map[string]any{"type": "text", "text": *question},
			}}},
		})
		return b
	}
	ctx := context.Background()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 2 * time.Minute}
	for range 3 {
		if _, err := chatOnce(ctx, client, *url, body(10)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	res := map[string]any{"image": *image, "bytes": len(img), "distinct": len(urls)}
	ns, err := tokenCounts(*lengths)
	if err != nil {
		return err
	}
	for _, n := range ns {
		if *runs <= 0 { // -runs 0: the concurrency levels only
			break
		}
		var tot, first []float64
		stages := map[string][]float64{}
		tpot := 0.0
		for range *runs {
			r, err := chatOnce(ctx, client, *url, body(n))
			if err != nil {
				return err
			}
			if r.tokens != n || r.chunks == 0 {
				return fmt.Errorf("usage reports %d completion tokens (%d text chunks), asked for %d", r.tokens, r.chunks, n)
			}
			tot = append(tot, float64(r.total.Microseconds())/1000)
			first = append(first, float64(r.ttft.Microseconds())/1000)
			tpot += float64((r.total - r.ttft).Microseconds()) / 1000 / float64(n-1)
			for k, v := range r.stages {
				stages[k] = append(stages[k], v)
			}
		}
		l := map[string]float64{"p50_ms": speed.Percentile(tot, 50), "p95_ms": speed.Percentile(tot, 95), "ttft_p50_ms": speed.Percentile(first, 50), "tpot_mean_ms": tpot / float64(*runs)}
		res["c1_"+strconv.Itoa(n)+"tok"] = l
		fmt.Printf("bench http c=1 %2d tokens: p50 %.2f ms  p95 %.2f ms  TTFT %.2f ms  TPOT %.3f ms\n", n, l["p50_ms"], l["p95_ms"], l["ttft_p50_ms"], l["tpot_mean_ms"])
		// Where the server says the time went (p50 of each stage), to split the client's
		// latency into transport + parsing and the pipeline's stages.
		names := make([]string, 0, len(stages))
		for k := range stages {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			l["stage_"+k+"_p50_ms"] = speed.Percentile(stages[k], 50)
			parts = append(parts, fmt.Sprintf("%s %.2f", k, speed.Percentile(stages[k], 50)))
		}
		if len(parts) > 0 {
			fmt.Printf("bench http c=1 %2d tokens: server stages p50 ms: %s\n", n, strings.Join(parts, ", "))
		}
	}
	level, warmup := time.Duration(*secs*float64(time.Second)), time.Duration(*warm*float64(time.Second))
	for _, f := range strings.Split(*conc, ",") {
		if f == "" { // -concurrency "": the latency figures only
			continue
		}
		c, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		var mu sync.Mutex
		var tot, first []float64
		stages := map[string][]float64{}
		run, err := speed.ClosedLoopRun(c, level, func() error {
			r, err := chatOnce(ctx, client, *url, body(10))
			if err == nil {
				mu.Lock()
				tot = append(tot, float64(r.total.Microseconds())/1000)
				first = append(first, float64(r.ttft.Microseconds())/1000)
				for k, v := range r.stages {
					stages[k] = append(stages[k], v)
				}
				mu.Unlock()
			}
			return err
		})
		if err != nil {
			return err
		}
		done, el := run.Done, run.Seconds
		// the rate between the ramp-up and the deadline: the whole run's also counts the ramp-up
		// (c requests in flight, none answered yet) and the drain after the deadline
		steady := run.Steady(warmup, level)
		res["c"+f+"_images_per_s"] = float64(done) / el
		res["c"+f+"_steady_images_per_s"] = steady
		l := map[string]float64{"p50_ms": speed.Percentile(tot, 50), "p95_ms": speed.Percentile(tot, 95), "ttft_p50_ms": speed.Percentile(first, 50), "ttft_p95_ms": speed.Percentile(first, 95)}
		res["load_c"+f+"_10tok"] = l // not c1_10tok: that is the latency run's
		fmt.Printf("bench http c=%d: %d requests of 10 tokens in %.1f s: %.2f images/s (steady, %g-%g s: %.2f); latency p50 %.1f ms p95 %.1f ms; TTFT p50 %.1f ms p95 %.1f ms\n",
			c, done, el, float64(done)/el, *warm, *secs, steady, speed.Percentile(tot, 50), speed.Percentile(tot, 95), speed.Percentile(first, 50), speed.Percentile(first, 95))
		names := make([]string, 0, len(stages))
		for k := range stages {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			l["stage_"+k+"_p50_ms"] = speed.Percentile(stages[k], 50)
			parts = append(parts, fmt.Sprintf("%s %.2f", k, speed.Percentile(stages[k], 50)))
		}
		fmt.Printf("bench http c=%d: server stages p50 ms: %s\n", c, strings.Join(parts, ", "))
	}
	if *out != "" {
		data, _ := json.MarshalIndent(res, "", " ")
		return os.WriteFile(*out, data, 0o644)
	}
	return nil
}

// variantsOf makes n distinct images from src: the file itself, then copies with one pixel
// changed (pixel i of the raster gets a colour of its own) and re-encoded in src's format (JPEG
// at quality 90), so every copy has its own bytes and its own pixels.
func variantsOf(src []byte, n int) ([][]byte, error) {
	out := [][]byte{src}
	if n <= 1 {
		return out, nil
	}
	img, format, err := image.Decode(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	rgba := image.NewRGBA(b)
	draw.Draw(rgba, b, img, b.Min, draw.Src)
	for i := 1; i < n; i++ {
		v := image.NewRGBA(b)
		copy(v.Pix, rgba.Pix)
		x, y := b.Min.X+i%b.Dx(), b.Min.Y+(i/b.Dx())%b.Dy()
		old := v.RGBAAt(x, y)
		v.SetRGBA(x, y, color.RGBA{R: old.R ^ 0x80, G: old.G ^ 0x40, B: old.B ^ 0x20, A: 255})
		var buf bytes.Buffer
		if format == "png" {
			err = png.Encode(&buf, v)
		} else {
			err = jpeg.Encode(&buf, v, &jpeg.Options{Quality: 90})
		}
		if err != nil {
			return nil, err
		}
		out = append(out, buf.Bytes())
	}
	return out, nil
}
