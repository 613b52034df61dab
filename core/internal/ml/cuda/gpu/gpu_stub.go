//go:build !cuda

package gpu

// Device is a CUDA device; in this build none can be opened.
type Device struct{}

// Open reports ErrNoCUDA: this binary was built without the cuda tag.
func Open(ordinal int) (*Device, error) { return nil, ErrNoCUDA }

// Info is empty in a build without CUDA.
func (d *Device) Info() Info { return Info{} }

// Do reports ErrNoCUDA.
func (d *Device) Do(fn func() error) error { return ErrNoCUDA }

// Close does nothing.
func (d *Device) Close() error { return nil }

// Lane reports ErrNoCUDA.
func (d *Device) Lane() (*Device, error) { return nil, ErrNoCUDA }
