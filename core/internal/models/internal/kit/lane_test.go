package kit

import (
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
)

// towerOnly is a Family whose tower writes each image's first pixel as its one row; it binds and
// decodes nothing (the test calls the tower alone).
type towerOnly struct{}

func (towerOnly) Bind(*ml.Loader, *model.Config) (Head, error) { return Head{}, nil }
func (towerOnly) LayerOps(*Pass) (int, ml.Tensor)              { return 0, ml.Tensor{} }
func (towerOnly) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	px := make([]float32, len(imgs))
	for i, img := range imgs {
		px[i] = img.Pixels[0]
	}
	b.Write(res, px)
}

// TestLaneBesideDecoder: a vision pass on a lane starts while the decoder's pass holds the model
// (mu), as the scheduler's two loops need; on the decoder's backend it waits for that pass.
func TestLaneBesideDecoder(t *testing.T) {
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lane()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Vision: model.VisionConfig{InChannels: 1, TemporalPatchSize: 1, PatchSize: 1, MergeSize: 1, OutHidden: 1}}
	m := &Base{b: b, lanes: []*lane{{b: lb}}, cfg: cfg, lim: model.Limits{MaxImagePatches: 4, MaxGridSide: 4}, fam: towerOnly{}}
	defer m.Close()
	encode := func() chan float32 {
		out := make(chan float32, 1)
		go func() {
			e, err := m.EncodeVision(t.Context(), model.Image{Pixels: []float32{5}, Grid: model.Grid{T: 1, H: 1, W: 1}})
			if err != nil {
				t.Error(err)
				out <- -1
				return
			}
			out <- e.Data[0]
		}()
		return out
	}

	m.mu.Lock() // a decoder pass in progress
	select {
	case v := <-encode():
		if v != 5 {
			t.Errorf("the lane's row %v, want 5", v)
		}
	case <-time.After(10 * time.Second):
		m.mu.Unlock()
		t.Fatal("the tower on its lane waited for the decoder's pass")
	}
	m.mu.Unlock()

	m.lanes = nil // no lane: the tower takes turns with the decoder
	m.mu.Lock()
	out := encode()
	select {
	case <-out:
		t.Error("the tower on the decoder's backend ran during the decoder's pass")
	case <-time.After(50 * time.Millisecond):
	}
	m.mu.Unlock()
	if v := <-out; v != 5 {
		t.Errorf("the row %v, want 5", v)
	}
}
