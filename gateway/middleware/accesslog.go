package middleware

import (
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
)

// AccessLog logs one line per request with fixed keys: request_id, correlation_id (when sent),
// bundle, method, path, status, code (the error code, if any), dur, bytes and client. A 5xx is
// logged at error level with its cause under err, and so is a stream that failed after its 200;
// nothing from the request body is logged.
// Requests to quiet routes (probes, scrapes) are logged at debug level whatever their status.
func AccessLog(log *slog.Logger, quiet ...string) gin.HandlerFunc {
	quietRoutes := make(map[string]bool, len(quiet))
	for _, r := range quiet {
		quietRoutes[r] = true
	}
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		attrs := make([]slog.Attr, 0, 12)
		attrs = append(attrs, slog.String("request_id", RequestIDOf(c)))
		if cid := CorrelationIDOf(c); cid != "" {
			attrs = append(attrs, slog.String("correlation_id", cid))
		}
		attrs = append(attrs,
			slog.String("bundle", Bundle(c)),
			slog.String("method", c.Request.Method),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", status),
			slog.String("code", ErrorCode(c)),
			slog.Duration("dur", time.Since(start)),
			slog.Int("bytes", max(c.Writer.Size(), 0)),
			slog.String("client", c.ClientIP()),
		)
		// A stream that failed after it started was sent as 200; its recorded error still counts.
		e := ErrorOf(c)
		worst := status
		if e != nil {
			worst = max(worst, e.Status)
		}
		level := slog.LevelInfo
		switch {
		case quietRoutes[c.FullPath()]:
			level = slog.LevelDebug
		case worst >= 500:
			level = slog.LevelError
			if e != nil && e.Err != nil {
				attrs = append(attrs, slog.String("err", e.Err.Error()))
			}
		}
		log.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}
}
