package otlp

import (
	"encoding/hex"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// toProto encodes spans as a protobuf export request.
func toProto(t testing.TB, spans []Span) []byte {
	t.Helper()
	id := func(s string) []byte {
		if s == "" {
			return nil
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ss := &tracepb.ScopeSpans{}
	for _, s := range spans {
		ps := &tracepb.Span{TraceId: id(s.TraceID), SpanId: id(s.SpanID), ParentSpanId: id(s.ParentSpanID), Name: s.Name,
			Kind: tracepb.Span_SpanKind(s.Kind), StartTimeUnixNano: uint64(s.StartNS), EndTimeUnixNano: uint64(s.EndNS)}
		for k, v := range s.Attrs {
			av := &commonpb.AnyValue{}
			switch x := v.(type) {
			case string:
				av.Value = &commonpb.AnyValue_StringValue{StringValue: x}
			case int64:
				av.Value = &commonpb.AnyValue_IntValue{IntValue: x}
			case float64:
				av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: x}
			case bool:
				av.Value = &commonpb.AnyValue_BoolValue{BoolValue: x}
			}
			ps.Attributes = append(ps.Attributes, &commonpb.KeyValue{Key: k, Value: av})
		}
		ss.Spans = append(ss.Spans, ps)
	}
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
