package middleware

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/iris-vlm/iris/gateway"

// Tracing starts a server span for every request, as a child of the caller's span when the
// request carries W3C trace context (traceparent), so that a client's trace continues through
// the gateway into the runtime. The span carries the request and correlation ids, the route,
// the status and the error code.
func Tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) gin.HandlerFunc {
	tracer := tp.Tracer(tracerName)
	return func(c *gin.Context) {
		ctx := prop.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		route := c.FullPath()
		name := c.Request.Method
		if route != "" {
			name += " " + route
		}
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", c.Request.Method),
			attribute.String("url.path", c.Request.URL.Path),
			attribute.String("iris.request_id", RequestIDOf(c)),
		}
		if route != "" {
			attrs = append(attrs, attribute.String("http.route", route))
		}
		if cid := CorrelationIDOf(c); cid != "" {
			attrs = append(attrs, attribute.String("iris.correlation_id", cid))
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if b := Bundle(c); b != "" {
			span.SetAttributes(attribute.String("iris.bundle", b))
		}
		code := ErrorCode(c)
		if code != "" {
			span.SetAttributes(attribute.String("error.type", code))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, code)
		}
	}
}
