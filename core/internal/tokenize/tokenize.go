// Package tokenize turns text into token ids and back with a Hugging Face tokenizer.json.
//
// It is the only user of github.com/daulet/tokenizers (a cgo binding to the Rust tokenizers
// library, linked from libtokenizers.a built by `just setup`). Files are always loaded from the
// bundle; nothing is ever downloaded.
package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/daulet/tokenizers"
)

// ErrClosed is returned by a Tokenizer after Close.
var ErrClosed = errors.New("tokenizer closed")

// Tokenizer encodes and decodes with one tokenizer.json.
//
// # Notes
//
//   - Encode, Decode and TokenID are safe for concurrent use; Close waits for calls in flight.
//   - Added special tokens written in the text (e.g. "<|im_start|>") encode to their ids, as the
//     transformers processors do; no BOS is added.
type Tokenizer struct {
	mu      sync.RWMutex
	tk      *tokenizers.Tokenizer
	special map[string]int32 // added tokens by content
	names   map[int32]string
	vocab   int
	bytes   tokenBytes
}

// Load reads dir/tokenizer.json.
func Load(dir string) (*Tokenizer, error) {
	return LoadFile(filepath.Join(dir, "tokenizer.json"))
}

// LoadFile reads a tokenizer.json file.
func LoadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	var doc struct {
		AddedTokens []struct {
			ID      int32  `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("load tokenizer %s: parse: %w", path, err)
	}
	tk, err := tokenizers.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	t := &Tokenizer{tk: tk, special: map[string]int32{}, names: map[int32]string{}, vocab: int(tk.VocabSize())}
	t.bytes.path = path
	for _, a := range doc.AddedTokens {
		t.special[a.Content] = a.ID
		t.names[a.ID] = a.Content
	}
	return t, nil
}

// Encode returns the ids of text. Text containing a NUL byte or invalid UTF-8 is refused: the
// binding passes C strings, which would silently cut it.
func (t *Tokenizer) Encode(text string) ([]int32, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, errors.New("encode: text contains a NUL byte")
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("encode: text is not valid UTF-8")
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.tk == nil {
		return nil, ErrClosed
	}
	if text == "" {
		return []int32{}, nil
	}
	ids, _ := t.tk.Encode(text, false)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

// Decode returns the text of ids, special tokens included (callers strip stop ids first).
func (t *Tokenizer) Decode(ids []int32) string {
	return t.decode(ids, false)
}

// DecodeSkipSpecial returns the text of ids without special tokens.
func (t *Tokenizer) DecodeSkipSpecial(ids []int32) string {
	return t.decode(ids, true)
}

func (t *Tokenizer) decode(ids []int32, skip bool) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.tk == nil || len(ids) == 0 {
		return ""
	}
	u := make([]uint32, len(ids))
	for i, id := range ids {
		u[i] = uint32(id)
	}
	return t.tk.Decode(u, skip)
}

// TokenID returns the id of an added (special) token such as "<|image_pad|>".
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	id, ok := t.special[token]
	return id, ok
}

// SpecialTokens returns the added tokens' contents; callers use it to refuse user text that
// spells a reserved token.
func (t *Tokenizer) SpecialTokens() []string {
	out := make([]string, 0, len(t.special))
	for s := range t.special {
		out = append(out, s)
	}
	return out
}

// VocabSize is the size of the tokenizer's vocabulary, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.vocab }

// Close frees the native tokenizer. It is safe to call more than once.
func (t *Tokenizer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tk != nil {
		err := t.tk.Close()
		t.tk = nil
		return err
	}
	return nil
}

// Stream turns a growing list of token ids into text deltas that never split a UTF-8 character:
// byte-level BPE tokens can end in the middle of one.
type Stream struct {
	t    *Tokenizer
	ids  []int32
	sent int // bytes of the decoded text already emitted
	skip bool
}

// NewStream returns a Stream; skipSpecial drops special tokens from the text.
func (t *Tokenizer) NewStream(skipSpecial bool) *Stream { return &Stream{t: t, skip: skipSpecial} }

// Add appends id and returns the text that became final, possibly empty.
func (s *Stream) Add(id int32) string {
	s.ids = append(s.ids, id)
	text := s.t.decode(s.ids, s.skip)
	if strings.HasSuffix(text, "\uFFFD") {
		return "" // an incomplete character: wait for the next token
	}
	if len(text) < s.sent {
		return ""
	}
	d := text[s.sent:]
	s.sent = len(text)
	return d
}

// Flush returns whatever was held back (an incomplete character at the end of the stream).
func (s *Stream) Flush() string {
	text := s.t.decode(s.ids, s.skip)
	if len(text) <= s.sent {
		return ""
	}
	d := text[s.sent:]
	s.sent = len(text)
	return d
}

// Text returns the full decoded text so far.
func (s *Stream) Text() string { return s.t.decode(s.ids, s.skip) }
