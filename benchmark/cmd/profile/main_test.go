package profile

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	// The gateway's exporter starts before the profiler's receiver listens; its first failed
	// export (the warmup's spans) is expected.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	os.Exit(m.Run())
}
