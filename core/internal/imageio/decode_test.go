package imageio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// goldenCase is one row of a golden.json written by scripts/reference/golden_imageio.py.
type goldenCase struct {
	File          string
	SHA256        string
	Note          string
	Width, Height int
	RGBSHA256     string `json:"rgb_sha256"`
	Error         string
}

func loadGolden(t *testing.T, dir string) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatalf("reading golden: %v", err)
	}
	var doc struct{ Cases []goldenCase }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parsing golden: %v", err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("golden in %s has no cases", dir)
	}
	return doc.Cases
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// refusedByDesign are files the reference decodes but Iris refuses on purpose.
var refusedByDesign = map[string]Code{
	"j16x16_cmyk.jpg": CodeColorModel,
	"p5x6_rgb16.png":  CodeColorModel,
}

func checkGolden(t *testing.T, dir string, c goldenCase) {
	data, err := os.ReadFile(filepath.Join(dir, c.File))
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	if hexSHA(data) != c.SHA256 {
		t.Fatalf("fixture bytes differ from the golden's")
	}
	hdr, err := Inspect(data, Limits{MaxPixels: 64 << 20})
	if err == nil {
		var img *RGB
		if img, err = Decode(context.Background(), data, hdr); err == nil {
			if c.Error != "" {
				t.Fatalf("decoded, but the reference refuses it (%s)", c.Error)
			}
			if img.W != c.Width || img.H != c.Height {
				t.Fatalf("decoded %dx%d, reference %dx%d", img.W, img.H, c.Width, c.Height)
			}
			if hdr.Width != c.Width || hdr.Height != c.Height {
				t.Fatalf("header says %dx%d, reference %dx%d", hdr.Width, hdr.Height, c.Width, c.Height)
			}
			if got := hexSHA(img.Pix); got != c.RGBSHA256 {
				t.Fatalf("decoded RGB sha256 %s, reference %s", got[:12], c.RGBSHA256[:12])
			}
			return
		}
	}
	if code, ok := refusedByDesign[c.File]; ok {
		if CodeOf(err) != code {
			t.Fatalf("refused with %v, want code %s", err, code)
		}
		return
	}
	if c.Error == "" {
		t.Fatalf("refused (%v), but the reference decodes it", err)
	}
	if CodeOf(err) == "" {
		t.Fatalf("refusal is not a typed *Error: %v", err)
	}
}

// TestDecodeGolden checks every committed fixture against the reference's pixels, or, when
// IRIS_DECODE_SWEEP names one, the larger uncommitted set `just decode-sweep` generates.
func TestDecodeGolden(t *testing.T) {
	dir := "testdata/decode"
	if d := os.Getenv("IRIS_DECODE_SWEEP"); d != "" {
		dir = d
	}
	cases := loadGolden(t, dir)
	for _, c := range cases {
		t.Run(c.File, func(t *testing.T) { checkGolden(t, dir, c) })
	}
	t.Logf("%d images checked in %s", len(cases), dir)
}
