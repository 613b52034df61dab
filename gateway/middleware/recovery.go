package middleware

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/gin-gonic/gin"
)

// maxPanicLen bounds the panic value written to the log.
const maxPanicLen = 1024

// Recovery turns a panic in a later handler into a 500 internal_error, logs it with the request
// id and the stack, and lets the server keep serving. A stream that already started gets an SSE
// error event instead. http.ErrAbortHandler is re-raised: it is net/http's way to drop a
// connection on purpose.
func Recovery(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			msg := fmt.Sprint(v)
			if len(msg) > maxPanicLen {
				msg = msg[:maxPanicLen] + "..."
			}
			log.LogAttrs(c.Request.Context(), slog.LevelError, "panic in handler",
				slog.String("request_id", RequestIDOf(c)),
				slog.String("bundle", Bundle(c)),
				slog.String("panic", msg),
				slog.String("stack", string(debug.Stack())))
			e := &HTTPError{Status: http.StatusInternalServerError, Code: "internal_error",
				Message: "internal error", Err: fmt.Errorf("panic: %s", msg)}
			if c.Writer.Written() && strings.HasPrefix(c.Writer.Header().Get("Content-Type"), "text/event-stream") {
				Record(c, e)
				c.Abort()
				_ = WriteSSEError(c.Writer, e)
				c.Writer.Flush()
				return
			}
			Render(c, e)
		}()
		c.Next()
	}
}
