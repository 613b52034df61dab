package core

import "strings"

// checkStop checks a request's stop strings; the gateway checks them first with the client's
// field names, this guards every other caller.
func checkStop(stop []string) error {
	if len(stop) > MaxStopStrings {
		return Errorf(KindInvalid, "invalid_value", "stop", "at most %d stop strings", MaxStopStrings)
	}
	for _, s := range stop {
		if s == "" || len(s) > MaxStopStringBytes {
			return Errorf(KindInvalid, "invalid_value", "stop", "a stop string must be 1 to %d bytes", MaxStopStringBytes)
		}
	}
	return nil
}

// stopper cuts a stream of answer text at the first stop string, OpenAI's stop semantics: the
// answer ends before it. Text that could still become a stop string is held back until the
// next text decides it, and nothing else is: a streamed answer waits only where it must.
type stopper struct {
	stops []string
	held  string
	sent  strings.Builder
	hit   bool
}

// push appends generated text and returns the part that is final. hit reports a stop string:
// the returned text ends before it, and nothing after it may be emitted.
func (s *stopper) push(text string) (out string, hit bool) {
	if s.hit {
		return "", true
	}
	buf := s.held + text
	cut := -1
	for _, st := range s.stops {
		if i := strings.Index(buf, st); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		s.held, s.hit = "", true
		s.sent.WriteString(buf[:cut])
		return buf[:cut], true
	}
	// Hold back the longest end of buf that begins some stop string. Every shorter partial
	// match of another stop string is an end of it too, so it is held as well. The held part
	// starts where a stop string starts, on a character boundary.
	keep := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, st[:n]) {
				keep = n
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	out = buf[:len(buf)-keep]
	s.sent.WriteString(out)
	return out, false
}

// flush returns the held-back text at the end of the answer: no stop string followed it.
func (s *stopper) flush() string {
	h := s.held
	s.held = ""
	s.sent.WriteString(h)
	return h
}

// text is every piece returned so far: the answer.
func (s *stopper) text() string { return s.sent.String() }
