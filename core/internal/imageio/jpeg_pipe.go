package imageio

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/iris-vlm/iris/core/internal/pixels"
)

// A baseline JPEG's first scan usually carries every component, interleaved, in one pass over
// the MCU rows. scanPipe reconstructs such a scan while the entropy decoder is still reading
// it: as each MCU row is decoded, its blocks go to the IDCT, and the output rows it completes to
// upsampling and colour conversion. Decoding first and then running the IDCT and the conversion
// in parallel bands (reconstructAll, toRGB) forks and joins four times per image, and on a
// virtual machine each fork waits tens of microseconds for idle vCPUs to wake, about as long as
// a band's work: the bands gained nothing there. The pipe's workers start once, at the start of
// the scan, so their wake-up overlaps the first rows' entropy decoding, and they stay awake
// between rows (see next). Every block and output row is computed by the same code as before,
// so the pixels are bit-identical; only the scheduling differs.

const (
	// maxPipeWorkers bounds the goroutines besides the decoder's: the IDCT and the conversion
	// cost about twice the entropy decoding, so two keep pace and a third shortens the tail.
	maxPipeWorkers = 3
	// idlePolls is how often an idle worker polls for the next row before it parks: about
	// 50 µs at ~100 ns per runtime.Gosched, longer than a typical row takes to decode.
	idlePolls = 512
)

// minPipePixels is the image area worth one worker (about a quarter of a millisecond of
// reconstruction); smaller images are reconstructed inline. Tests lower it to run workers on
// small fixtures.
var minPipePixels = 16 << 10

type scanPipe struct {
	d      *jpegDecoder
	rows   int // MCU rows in the scan
	rowH   int // output rows per MCU row
	inline *rgbWriter

	ready chan int // decoded MCU rows, in order; closed at the end of the scan
	quit  atomic.Bool
	wg    sync.WaitGroup
	ended bool

	mu        sync.Mutex
	idctDone  []bool // MCU rows whose blocks are reconstructed
	converted []bool // MCU rows whose output rows someone has converted or is converting
}

// startPipe returns a pipe for the scan about to be decoded, or nil when the scan is not one
// it handles: only a sequential image's first scan, covering every component, so that the
// scan's coefficients are final once it ends. A later scan of the same image makes the
// pipe's pixels stale; processSOS clears outDone, and the usual path recomputes them.
func (d *jpegDecoder) startPipe(nComp, rows int) *scanPipe {
	if d.progressive || d.scans != 1 || nComp != d.nComp {
		return nil
	}
	d.out = pixels.NewRGB(d.width, d.height)
	p := &scanPipe{
		d: d, rows: rows, rowH: 8 * d.vmax,
		idctDone: make([]bool, rows), converted: make([]bool, rows),
	}
	if d.nComp == 1 {
		p.rowH = 8 // a one-component scan is a block row per MCU row, its samples unscaled
	}
	workers := min(runtime.GOMAXPROCS(0)-1, maxPipeWorkers, d.width*d.height/minPipePixels, rows-1)
	if workers <= 0 {
		// One core (or a small image): reconstruct each row right after decoding it, while
		// its coefficients are still in cache.
		p.inline = d.newRGBWriter(d.out.Pix, d.rgb)
		return p
	}
	// Buffered for every row, so the decoder never blocks handing one over.
	p.ready = make(chan int, rows)
	p.wg.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

// decoded hands over MCU row my, whose coefficients the entropy decoder has finished.
func (p *scanPipe) decoded(my int) {
	if p.inline != nil {
		p.row(p.inline, my)
		return
	}
	p.ready <- my
}

// end returns once no worker runs. After a complete scan (ok) the decoder helps with the rows
// still queued and the image is done; after a failed one the workers drop their remaining
// rows, and the pixels are never used. processSOS defers end(false) for its error returns;
// a second call does nothing.
func (p *scanPipe) end(ok bool) {
	if p.ended {
		return
	}
	p.ended = true
	if p.inline != nil {
		p.d.outDone = ok
		return
	}
	if !ok {
		p.quit.Store(true)
	}
	close(p.ready)
	if ok {
		w := p.d.newRGBWriter(p.d.out.Pix, p.d.rgb)
		for my := range p.ready {
			p.row(w, my)
		}
	}
	p.wg.Wait()
	p.d.outDone = ok
}

func (p *scanPipe) work() {
	defer p.wg.Done()
	w := p.d.newRGBWriter(p.d.out.Pix, p.d.rgb)
	for {
		my, ok := p.next()
		if !ok || p.quit.Load() {
			return
		}
		p.row(w, my)
	}
}

// next receives the next decoded MCU row (false once the scan is over). An idle worker polls
// for a while, yielding its P, before it blocks: a parked goroutine's thread goes to sleep, and
// waking it for the next row is the very latency the pipe is there to avoid.
func (p *scanPipe) next() (int, bool) {
	for range idlePolls {
		select {
		case my, ok := <-p.ready:
			return my, ok
		default:
			runtime.Gosched()
		}
	}
	my, ok := <-p.ready
	return my, ok
}

// row reconstructs the blocks of MCU row my, then converts the output rows whose samples that
// completes. Fancy upsampling reads the chroma sample rows above and below an output row's
// own (jpeg_color.go), which can lie in the neighbouring MCU rows, so an MCU row's output is
// converted once its neighbours are reconstructed too (at the image's edges, the clamped rows
// are in the row itself).
func (p *scanPipe) row(w *rgbWriter, my int) {
	d := p.d
	for i := range d.nComp {
		c := &d.comp[i]
		v := c.v // block rows per MCU row: the MCU's own for an interleaved scan, else one
		if d.nComp == 1 {
			v = 1
		}
		for by := v * my; by < min(v*(my+1), c.bh); by++ {
			for bx := range c.bw {
				c.reconstruct(&c.coefs[by*c.aw+bx], bx, by)
			}
		}
	}
	var todo [3]int
	n := 0
	p.mu.Lock()
	p.idctDone[my] = true
	for r := max(my-1, 0); r <= min(my+1, p.rows-1); r++ {
		if !p.converted[r] && p.idctDone[max(r-1, 0)] && p.idctDone[r] && p.idctDone[min(r+1, p.rows-1)] {
			p.converted[r] = true
			todo[n] = r
			n++
		}
	}
	p.mu.Unlock()
	for _, r := range todo[:n] {
		w.rows(r*p.rowH, min((r+1)*p.rowH, d.height))
	}
}
