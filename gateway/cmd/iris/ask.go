package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/iris-vlm/iris/benchmark/sse"
	"github.com/iris-vlm/iris/gateway/openai"
)

// defaultAskTokens is `iris ask`'s generation limit unless --max-tokens says otherwise: enough for
// a sentence or two, while a bundle's own limit (256 for the demo ones) prints a screenful.
const defaultAskTokens = 64

// ask sends one image question to an OpenAI-compatible server and prints the answer, the
// usage, the image's identity and the server's per-stage timings.
func ask(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("iris ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "server base URL")
	model := fs.String("model", "", "model name (default: the server's first model)")
	imagePath := fs.String("image", "", "PNG or JPEG file")
	maxTokens := fs.Int("max-tokens", defaultAskTokens, "generation limit; 0 leaves it to the bundle (often 256 or more, long for a\n"+
		"terminal and slow on a CPU). The default fits a short answer to one question")
	stream := fs.Bool("stream", false, "stream the answer as it is generated")
	asJSON := fs.Bool("json", false, "print the raw response")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: iris ask --image <file> [flags] <question>")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	question := strings.Join(fs.Args(), " ")
	if *imagePath == "" || question == "" {
		fs.Usage()
		return errors.New("ask: an --image and a question are required")
	}
	img, err := os.ReadFile(*imagePath)
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	media := "image/png"
	if ext := strings.ToLower(filepath.Ext(*imagePath)); ext == ".jpg" || ext == ".jpeg" {
		media = "image/jpeg"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	base := strings.TrimSuffix(*url, "/")
	if *model == "" {
		if *model, err = firstModel(ctx, base); err != nil {
			return err
		}
	}
	req := openai.ChatCompletionRequest{
		Model: *model,
		Messages: []openai.Message{{Role: "user", Content: []openai.ContentPart{
			{Type: "image_url", ImageURL: &openai.ImageURL{URL: "data:" + media + ";base64," + base64.StdEncoding.EncodeToString(img)}},
			{Type: "text", Text: question},
		}}},
		Stream: *stream,
	}
	if *maxTokens > 0 {
		req.MaxTokens = maxTokens
	}
	if *stream {
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("ask: %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	var (
		text   strings.Builder
		usage  *openai.Usage
		iris   *openai.Iris
		finish string
		ttft   time.Duration
	)
	if *stream {
		rd := sse.NewReader(resp.Body)
		for {
			msg, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("ask: %w", err)
			}
			event, data := sse.Data(msg)
			if event == "error" {
				return fmt.Errorf("ask: the server's stream failed: %s", data)
			}
			if data == "" || data == "[DONE]" {
				continue
			}
			var ch openai.ChatCompletionChunk
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				return fmt.Errorf("ask: bad chunk: %w", err)
			}
			for _, c := range ch.Choices {
				if c.Delta.Content != nil && *c.Delta.Content != "" {
					if ttft == 0 {
						ttft = time.Since(start)
					}
					fmt.Fprint(stdout, *c.Delta.Content)
					text.WriteString(*c.Delta.Content)
				}
				if c.FinishReason != nil {
					finish = *c.FinishReason
				}
			}
			if ch.Usage != nil {
				usage = ch.Usage
			}
			if ch.Iris != nil {
				iris = ch.Iris
			}
		}
		fmt.Fprintln(stdout)
	} else {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("ask: %w", err)
		}
		if *asJSON {
			_, err := stdout.Write(append(raw, '\n'))
			return err
		}
		var cc openai.ChatCompletion
		if err := json.Unmarshal(raw, &cc); err != nil {
			return fmt.Errorf("ask: bad response: %w", err)
		}
		if len(cc.Choices) > 0 {
			text.WriteString(cc.Choices[0].Message.Content)
			finish = cc.Choices[0].FinishReason
		}
		usage, iris = cc.Usage, cc.Iris
		fmt.Fprintf(stdout, "answer:  %q\n", text.String())
	}
	total := time.Since(start)
	fmt.Fprintf(stdout, "finish:  %s\n", finish)
	if usage != nil {
		img := 0
		if usage.PromptTokensDetails != nil {
			img = usage.PromptTokensDetails.ImageTokens
		}
		fmt.Fprintf(stdout, "usage:   prompt %d (image %d), completion %d, total %d\n", usage.PromptTokens, img, usage.CompletionTokens, usage.TotalTokens)
	}
	if iris != nil {
		if iris.Image != nil {
			fmt.Fprintf(stdout, "image:   sha256 %s, %s %dx%d\n", iris.Image.SHA256, iris.Image.Format, iris.Image.Width, iris.Image.Height)
		}
		fmt.Fprintf(stdout, "bundle:  %s (%.12s)\n", iris.Bundle.Name, iris.Bundle.Digest)
		fmt.Fprintf(stdout, "stages:  %s\n", formatStages(iris.TimingsMS))
	}
	fmt.Fprintf(stdout, "client:  %.1f ms total", float64(total.Microseconds())/1000)
	if ttft > 0 {
		fmt.Fprintf(stdout, ", %.1f ms to the first token", float64(ttft.Microseconds())/1000)
	}
	fmt.Fprintln(stdout)
	return nil
}

// stageOrder is the pipeline order of the server's stages.
var stageOrder = []string{"queue", "decode_image", "plan", "frame", "tokenize", "pixels", "vision", "vision_cached", "prefill", "decode"}

func formatStages(ms map[string]float64) string {
	rank := map[string]int{}
	for i, s := range stageOrder {
		rank[s] = i + 1
	}
	names := make([]string, 0, len(ms))
	for n := range ms {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank[names[i]], rank[names[j]]
		if ri == 0 || rj == 0 {
			return ri != 0 || (rj == 0 && names[i] < names[j])
		}
		return ri < rj
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f ms", n, ms[n])
	}
	return strings.Join(parts, ", ")
}

func firstModel(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask: list models: %w", err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("ask: list models: %w", err)
	}
	if len(list.Data) == 0 {
		return "", errors.New("ask: the server lists no models")
	}
	return list.Data[0].ID, nil
}
