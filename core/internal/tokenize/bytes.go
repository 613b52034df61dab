package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// tokenBytes is the raw bytes of every token of a byte-level BPE vocabulary, loaded on first use
// (only logprobs answers need it).
type tokenBytes struct {
	once sync.Once
	path string
	b    map[int32][]byte
	err  error
}

// TokenBytes returns the bytes a token stands for: an added token's content, or a byte-level
// BPE token's bytes, which may be part of a UTF-8 character (OpenAI's logprobs `bytes`). The
// tokenizer's decoder must be ByteLevel (GPT-2, Qwen); any other is an error.
func (t *Tokenizer) TokenBytes(id int32) ([]byte, error) {
	if s, ok := t.names[id]; ok {
		return []byte(s), nil
	}
	tb := &t.bytes
	tb.once.Do(func() { tb.b, tb.err = loadTokenBytes(tb.path) })
	if tb.err != nil {
		return nil, tb.err
	}
	b, ok := tb.b[id]
	if !ok {
		return nil, fmt.Errorf("token id %d is not in the vocabulary", id)
	}
	return b, nil
}

func loadTokenBytes(path string) (map[int32][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token bytes: %w", err)
	}
	var doc struct {
		Decoder struct {
			Type string `json:"type"`
		} `json:"decoder"`
		Model struct {
			Vocab map[string]int32 `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("token bytes: parse %s: %w", path, err)
	}
	if doc.Decoder.Type != "ByteLevel" {
		return nil, fmt.Errorf("token bytes: decoder %q is not ByteLevel", doc.Decoder.Type)
	}
	dec := byteDecoder()
	out := make(map[int32][]byte, len(doc.Model.Vocab))
	for tok, id := range doc.Model.Vocab {
		b := make([]byte, 0, len(tok))
		for _, r := range tok {
			c, ok := dec[r]
			if !ok {
				return nil, fmt.Errorf("token bytes: token %d has the character %U outside the byte alphabet", id, r)
			}
			b = append(b, c)
		}
		out[id] = b
	}
	return out, nil
}

// byteDecoder inverts GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// every other byte for 256 + its rank among them.
func byteDecoder() map[rune]byte {
	dec := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			dec[rune(b)] = byte(b)
		} else {
			dec[rune(256+n)] = byte(b)
			n++
		}
	}
	return dec
}
