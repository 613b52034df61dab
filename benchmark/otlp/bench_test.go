package otlp

import (
	"os"
	"testing"
)

func BenchmarkDecode(b *testing.B) {
	body, err := os.ReadFile("testdata/export.json")
	if err != nil {
		b.Fatal(err)
	}
	spans, err := DecodeJSON(body)
	if err != nil {
		b.Fatal(err)
	}
	pb := toProto(b, spans)
	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, _ = DecodeJSON(body)
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			_, _ = DecodeProtobuf(pb)
		}
	})
}
