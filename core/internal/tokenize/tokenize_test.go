package tokenize

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// tokenizerDir is where `just setup` puts the real Qwen tokenizer.
func tokenizerDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", ".build", "tokenizer", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("real tokenizer missing (run `just setup`): %v", err)
	}
	return dir
}

type golden struct {
	TokenizerSHA256 string `json:"tokenizer_sha256"`
	Cases           []struct {
		Text    string  `json:"text"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"cases"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 20 {
		t.Fatalf("golden has %d cases, want >= 20", len(g.Cases))
	}
	return g
}

func TestGoldenIDs(t *testing.T) {
	dir := tokenizerDir(t)
	g := loadGolden(t)
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != g.TokenizerSHA256 {
		t.Fatalf("tokenizer.json digest differs from the one the golden file was made with")
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	for i, c := range g.Cases {
		name := c.Text
		if len(name) > 24 {
			name = name[:24]
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			ids, err := tk.Encode(c.Text)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if !slices.Equal(ids, c.IDs) {
				t.Fatalf("case %d ids:\n got %v\nwant %v", i, ids, c.IDs)
			}
			if got := tk.Decode(ids); got != c.Decoded {
				t.Fatalf("case %d decode: got %q want %q", i, got, c.Decoded)
			}
			if got := tk.Decode(ids); got != c.Text {
				t.Fatalf("case %d round trip: got %q want %q", i, got, c.Text)
			}
		})
	}
}

func TestSpecialTokens(t *testing.T) {
	tk, err := Load(tokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	for tok, want := range map[string]int32{
		"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
		"<|vision_start|>": 151652, "<|vision_end|>": 151653, "<|image_pad|>": 151655,
	} {
		if got, ok := tk.TokenID(tok); !ok || got != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tok, got, ok, want)
		}
	}
	if _, ok := tk.TokenID("hello"); ok {
		t.Errorf("TokenID(hello) found a special token")
	}
}

func TestEncodeRefusesWhatCWouldCut(t *testing.T) {
	tk, err := Load(tokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	for _, s := range []string{"a\x00b", "bad \xff utf8"} {
		if _, err := tk.Encode(s); err == nil {
			t.Errorf("Encode(%q) succeeded", s)
		}
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Encode("x"); err == nil {
		t.Errorf("Encode after Close succeeded")
	}
	if err := tk.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStreamNeverSplitsACharacter(t *testing.T) {
	tk, err := Load(tokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	for _, text := range []string{"Emoji: 🐈‍⬛ 👩🏽‍💻 🇯🇵 ✨", "这是什么动物？", "plain ascii text"} {
		ids, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		s := tk.NewStream(false)
		var b strings.Builder
		for _, id := range ids {
			d := s.Add(id)
			if strings.ContainsRune(d, '\uFFFD') {
				t.Fatalf("%q: delta %q holds a replacement character", text, d)
			}
			b.WriteString(d)
		}
		b.WriteString(s.Flush())
		if b.String() != text {
			t.Fatalf("stream gave %q, want %q", b.String(), text)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tk, err := Load(tokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	want, err := tk.Encode("What is the main object in this image?")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, err := tk.Encode("What is the main object in this image?")
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("concurrent encode: %v %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkEncodePrompt(b *testing.B) {
	tk, err := Load(tokenizerDir(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tk.Close() })
	text := "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<|vision_start|>"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tk.Encode(text); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTokenBytes: the bytes of a text's tokens, joined, are the text's UTF-8 (byte-level BPE
// splits characters across tokens; a token's bytes may be part of one), and an added token's
// bytes are its content.
func TestTokenBytes(t *testing.T) {
	tk, err := Load(tokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	for _, text := range []string{"A cat sat.", "Unicode: 東京 ☃\nsecond line 🐱", "  spaces\tand\u00a0nbsp", "<|im_start|>user\nhi<|im_end|>"} {
		ids, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		var joined []byte
		partial := false
		for _, id := range ids {
			b, err := tk.TokenBytes(id)
			if err != nil {
				t.Fatal(err)
			}
			partial = partial || !utf8.Valid(b)
			joined = append(joined, b...)
		}
		if string(joined) != text {
			t.Errorf("%q: token bytes join to %q", text, joined)
		}
		if strings.Contains(text, "🐱") && !partial {
			t.Errorf("%q: no token holds part of a character; the test proves less than it says", text)
		}
	}
	if _, err := tk.TokenBytes(1 << 30); err == nil {
		t.Error("an id outside the vocabulary has bytes")
	}
}
