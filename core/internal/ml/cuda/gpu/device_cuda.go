//go:build cuda

package gpu

import (
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"
)

// Device is one CUDA device with a context owned by a goroutine locked to its OS thread.
type Device struct {
	info Info
	work chan func()
	done chan struct{}
	mu   sync.RWMutex // Close takes it exclusively; Do holds it shared while handing work over
	shut bool
	ctx  cu.CUContext
	lane bool // a second thread on another Device's context (Lane): Close leaves the context
}

// Open creates a context on device ordinal and starts the goroutine that owns it.
func Open(ordinal int) (*Device, error) {
	d := &Device{work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go d.loop(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// loop owns the context: every driver call for it runs here, on one OS thread.
func (d *Device) loop(ordinal int, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	defer close(d.done)
	if err := d.init(ordinal); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for fn := range d.work {
		fn()
	}
	_ = cu.Synchronize()
	_ = d.ctx.Destroy()
}

// Lane starts a second goroutine, locked to an OS thread of its own, on d's context: its Do
// runs beside d's, so that work it enqueues on streams of its own runs on the GPU beside d's
// (and its host waits block it, not d). Memory, modules and functions are the context's: both
// use them. Close the lane before d; its Close leaves the context alone.
func (d *Device) Lane() (*Device, error) {
	l := &Device{info: d.info, work: make(chan func()), done: make(chan struct{}), ctx: d.ctx, lane: true}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(l.done)
		if err := cu.SetCurrentContext(l.ctx); err != nil {
			ready <- fmt.Errorf("making the CUDA context current on a lane: %w", err)
			return
		}
		ready <- nil
		for fn := range l.work {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return l, nil
}

func (d *Device) init(ordinal int) error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("counting CUDA devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("CUDA device %d: %d devices present", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return fmt.Errorf("getting CUDA device %d: %w", ordinal, err)
	}
	// SchedAuto spins while waiting when cores outnumber contexts (the case here): a decode
	// step waits on the GPU every few milliseconds, and a sleeping waiter adds wake-up latency.
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("creating a context on CUDA device %d: %w", ordinal, err)
	}
	info := Info{Ordinal: ordinal, Driver: cu.Version()}
	info.Name, _ = dev.Name()
	info.TotalMem, _ = dev.TotalMem()
	info.ComputeMajor, _ = dev.Attribute(cu.ComputeCapabilityMajor)
	info.ComputeMinor, _ = dev.Attribute(cu.ComputeCapabilityMinor)
	info.SMs, _ = dev.Attribute(cu.MultiprocessorCount)
	d.info = info
	return nil
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Do runs fn on the context's thread and returns its error. fn must not call Do (it would wait
// for itself). A panic in fn is returned as an error.
func (d *Device) Do(fn func() error) error {
	d.mu.RLock()
	if d.shut {
		d.mu.RUnlock()
		return ErrClosed
	}
	res := make(chan error, 1)
	d.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("panic on the CUDA thread: %v", r)
			}
		}()
		res <- fn()
	}
	d.mu.RUnlock()
	return <-res
}

// Close waits for queued work, destroys the context and stops its goroutine. It is safe to call
// more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	if !d.shut {
		d.shut = true
		close(d.work)
	}
	d.mu.Unlock()
	<-d.done
	return nil
}
