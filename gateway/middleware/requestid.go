package middleware

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gin-gonic/gin"
)

// Correlation headers. AIPerf sends both, fresh per request.
const (
	HeaderRequestID     = "X-Request-ID"
	HeaderCorrelationID = "X-Correlation-ID"
)

// maxIDLen bounds a client-chosen id; longer ones are replaced (request id) or dropped
// (correlation id).
const maxIDLen = 128

// RequestID gives every request an id: the client's X-Request-ID when it is valid (1 to 128
// printable ASCII characters, no spaces), else a fresh UUIDv4. The id is echoed in the response,
// and so is a valid X-Correlation-ID.
func RequestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(HeaderRequestID)
		if !validID(id) {
			id = newID()
		}
		c.Set(keyRequestID, id)
		c.Header(HeaderRequestID, id)
		if cid := c.GetHeader(HeaderCorrelationID); validID(cid) {
			c.Set(keyCorrelationID, cid)
			c.Header(HeaderCorrelationID, cid)
		}
		c.Next()
	}
}

// RequestIDOf returns the request's id ("" outside RequestID).
func RequestIDOf(c *gin.Context) string { return c.GetString(keyRequestID) }

// CorrelationIDOf returns the client's valid correlation id, or "".
func CorrelationIDOf(c *gin.Context) string { return c.GetString(keyCorrelationID) }

func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// newID returns a random UUIDv4.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
