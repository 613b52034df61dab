package imageproc

import "testing"

func TestRoundIsPython(t *testing.T) {
	// Values from CPython 3.11: round(x).
	for _, tc := range []struct {
		x    float64
		want int
	}{
		{0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4}, {-0.5, 0}, {-1.5, -2}, {-2.5, -2},
		{7.5, 8}, {6.5, 6}, {0.49999999999999994, 0}, {2.675, 3}, {10.0 / 28, 0}, {14.0 / 28, 0}, {42.0 / 28, 2},
	} {
		if got := Round(tc.x); got != tc.want {
			t.Errorf("Round(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

func TestFloorCeilDiv(t *testing.T) {
	if Floor(-0.5) != -1 || Ceil(-0.5) != 0 || Floor(2.9999) != 2 || Ceil(2.0000001) != 3 {
		t.Error("Floor/Ceil disagree with math.floor/ceil")
	}
	for _, tc := range [][3]int{{7, 2, 3}, {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}, {6, 3, 2}, {-6, 3, -2}} {
		if got := FloorDiv(tc[0], tc[1]); got != tc[2] {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
	if Div(1, 3) != 1.0/3 || AspectRatio(200, 1) != 200 || AspectRatio(3, 603) != 201 {
		t.Error("Div/AspectRatio")
	}
}
