//go:build goexperiment.jsonv2

package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshalWire: the single-scan decoding accepts exactly what encoding/json accepts, with
// the same values, and fails with its error.
func FuzzUnmarshalWire(f *testing.F) {
	for _, tt := range parseCases {
		f.Add([]byte(tt.body))
	}
	for _, s := range []string{`[1,2`, `{"model":"m"} x`, `{"Model":"a","model":"b","MODEL":"c"}`, "{\"user\":\"\xff\"}", `null`, `{"messages":[{"content":[{"a":1e999}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want wireRequest
		gotErr := unmarshalWire(b, &got)
		wantErr := json.Unmarshal(b, &want)
		if !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("error %v, encoding/json %v", gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, encoding/json %+v", got, want)
		}
	})
}
