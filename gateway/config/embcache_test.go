package config

import (
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core"
)

func TestEmbeddingCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      int64
		wantErr   string
	}{
		{"default", "", core.DefaultEmbeddingCacheBytes, ""},
		{"set", "[runtime]\nembedding_cache_bytes = 1048576", 1 << 20, ""},
		{"disabled", "[runtime]\nembedding_cache_bytes = 0", 0, ""},
		{"negative", "[runtime]\nembedding_cache_bytes = -1", 0, "runtime.embedding_cache_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Runtime.Core().EmbeddingCacheBytes; got != tc.want {
				t.Fatalf("core EmbeddingCacheBytes %d, want %d", got, tc.want)
			}
		})
	}
}
