package ml

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stFile is a safetensors file: the header's length, the header, dataLen zero bytes of data.
func stFile(header string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, dataLen)...)
}

// stValid holds four tensors in no particular order, an empty one and metadata: 40 bytes of data.
const stValid = `{"__metadata__":{"format":"pt"},` +
	`"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},` +
	`"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},` +
	`"ids":{"dtype":"I64","shape":[1,1],"data_offsets":[28,36]},` +
	`"empty":{"dtype":"F16","shape":[0,5],"data_offsets":[36,36]},` +
	`"mask":{"dtype":"BOOL","shape":[4],"data_offsets":[36,40]}}`

func TestParseSafetensorsHeader(t *testing.T) {
	file := stFile(stValid, 40)
	es, err := ParseSafetensorsHeader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	base := int64(8 + len(stValid))
	want := []SafetensorsEntry{
		{Name: "a", Dtype: "F32", Shape: []int64{4}, Offset: base, Size: 16},
		{Name: "b", Dtype: "BF16", Shape: []int64{2, 3}, Offset: base + 16, Size: 12},
		{Name: "ids", Dtype: "I64", Shape: []int64{1, 1}, Offset: base + 28, Size: 8},
		{Name: "empty", Dtype: "F16", Shape: []int64{0, 5}, Offset: base + 36, Size: 0},
		{Name: "mask", Dtype: "BOOL", Shape: []int64{4}, Offset: base + 36, Size: 4},
	}
	if !slices.EqualFunc(es, want, func(a, b SafetensorsEntry) bool {
		return a.Name == b.Name && a.Dtype == b.Dtype && slices.Equal(a.Shape, b.Shape) && a.Offset == b.Offset && a.Size == b.Size
	}) {
		t.Fatalf("entries\n got %+v\nwant %+v", es, want)
	}
	// The file opener reads the same entries and names the file in its errors.
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSafetensorsHeader(path); err != nil || len(got) != len(want) {
		t.Fatalf("ReadSafetensorsHeader: %d entries, %v", len(got), err)
	}
	if err := os.WriteFile(path, file[:len(file)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSafetensorsHeader(path); err == nil || !strings.HasPrefix(err.Error(), path+": tensor mask: offsets [36, 40) are not inside the 39 bytes") {
		t.Fatalf("a truncated file: %v", err)
	}
}

// stRefusals break one thing of a valid file each; want is a fragment of the check's message.
var stRefusals = []struct {
	name    string
	header  string
	dataLen int
	want    string
}{
	{"no header length", "", -8, "reading header length"},
	{"zero header length", "", 0, "header length 0 does not fit"},
	{"not json", "nope", 4, "parsing header"},
	{"tensor not an object", `{"a":[1]}`, 4, "tensor a: json"},
	{"begin negative", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, 4, "tensor a: offsets [-4, 0) are not inside the 4 bytes of data"},
	{"end before begin", `{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4, "tensor a: offsets [4, 0) are not inside"},
	{"end past the data", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "tensor a: offsets [0, 8) are not inside the 4 bytes of data"},
	{"negative dimension", `{"a":{"dtype":"U8","shape":[-1,-4],"data_offsets":[0,4]}}`, 4, "tensor a: shape [-1 -4] has a negative dimension"},
	{"more values than bytes", `{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}}`, 4, "more F32 values than 4 bytes hold"},
	{"more values than bits", `{"a":{"dtype":"F4","shape":[33],"data_offsets":[0,4]}}`, 4, "more F4 values than 4 bytes hold"},
	{"size not the shape's", `{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}}`, 8, "tensor a: 8 bytes, its BF16 shape [3] needs 6"},
	{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8,
		"tensors a and b overlap: [0, 8) and [4, 8)"},
	{"same bytes twice", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, 4,
		"tensors a and b overlap: [0, 4) and [0, 4)"},
}

func TestParseSafetensorsHeaderRefusals(t *testing.T) {
	for _, tc := range stRefusals {
		t.Run(tc.name, func(t *testing.T) {
			file := stFile(tc.header, max(tc.dataLen, 0))
			if tc.dataLen < 0 {
				file = file[:len(file)+tc.dataLen]
			}
			_, err := ParseSafetensorsHeader(bytes.NewReader(file), int64(len(file)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzSafetensorsHeader parses files of a fuzzed header and a fuzzed amount of data, in memory,
// and checks what it accepts against the file itself: every entry is one tensor of the header
// (metadata aside), its bytes lie inside the data, a whole-byte dtype's size is its shape's
// values times the width (computed in big integers), and no two entries' bytes overlap.
func FuzzSafetensorsHeader(f *testing.F) {
	f.Add([]byte(stValid), uint16(40))
	f.Add([]byte(`{"__metadata__":{"a":"b"},"x":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}`), uint16(2))
	f.Add([]byte(`{"x":{"dtype":"F32","shape":[1,2,3,4,5,6,7,8,9],"data_offsets":[0,4]}}`), uint16(4))
	for _, tc := range stRefusals {
		f.Add([]byte(tc.header), uint16(max(tc.dataLen, 0)))
	}
	f.Fuzz(func(t *testing.T, header []byte, dataLen uint16) {
		file := stFile(string(header), int(dataLen))
		es, err := ParseSafetensorsHeader(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(header, &raw); err != nil {
			t.Fatalf("accepted a header that is not a JSON object: %v", err)
		}
		delete(raw, "__metadata__")
		if len(es) != len(raw) {
			t.Fatalf("%d entries for the header's %d tensors", len(es), len(raw))
		}
		base, end := int64(8+len(header)), int64(len(file))
		for i, e := range es {
			if _, ok := raw[e.Name]; !ok {
				t.Fatalf("entry %q is not a tensor of the header", e.Name)
			}
			if e.Offset < base || e.Size < 0 || e.Offset > end-e.Size {
				t.Fatalf("tensor %s: bytes [%d, +%d) outside the data [%d, %d)", e.Name, e.Offset, e.Size, base, end)
			}
			numel := big.NewInt(1)
			for _, d := range e.Shape {
				if d < 0 {
					t.Fatalf("tensor %s: shape %v", e.Name, e.Shape)
				}
				numel.Mul(numel, big.NewInt(d))
			}
			if w, ok := safetensorsWidth[e.Dtype]; ok && numel.Mul(numel, big.NewInt(w)).Cmp(big.NewInt(e.Size)) != 0 {
				t.Fatalf("tensor %s: %d bytes for %s %v", e.Name, e.Size, e.Dtype, e.Shape)
			}
			if i > 0 && e.Offset < es[i-1].Offset {
				t.Fatalf("tensor %s before %s: not in the order of their bytes", es[i-1].Name, e.Name)
			}
			for _, o := range es[:i] {
				if e.Offset < o.Offset+o.Size && o.Offset < e.Offset+e.Size {
					t.Fatalf("tensors %s and %s overlap", o.Name, e.Name)
				}
			}
		}
	})
}
