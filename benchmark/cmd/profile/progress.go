package profile

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress reports finished requests: a redrawn bar on a terminal, a plain line every tenth of
// a phase otherwise (logs and CI).
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	start time.Time
	step  map[string]int
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), start: time.Now(), step: map[string]int{}}
}

func (p *progress) update(phase string, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		const width = 30
		fill := width * done / total
		fmt.Fprintf(p.w, "\r%-9s [%s%s] %d/%d %5.1fs", phase, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), done, total, time.Since(p.start).Seconds())
		if done == total {
			fmt.Fprintln(p.w)
		}
		return
	}
	tenth := 10 * done / total
	if tenth > p.step[phase] || done == total || done == 1 {
		p.step[phase] = tenth
		fmt.Fprintf(p.w, "profile: %s %d/%d (%.1fs)\n", phase, done, total, time.Since(p.start).Seconds())
	}
}
