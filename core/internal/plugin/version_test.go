package plugin

import (
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// TestCheckVersion: the description's ABI must be one the module's marker reaches, at a wire
// minor that carries it.
func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		abi, minor, marker int
		want               string
	}{
		{1, 0, 1, ""},
		{1, abi.Minor, 2, ""},
		{2, abi.Minor, 2, ""},
		{2, abi.Minor, 1, "its marker iris_abi_v1 says at most v1"},
		{2, 1, 2, "ABI v2 needs minor 2"},
	} {
		err := checkVersion(&abi.Description{ABI: tc.abi, Minor: tc.minor}, tc.marker)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ABI %d minor %d marker %d: %v, want %q", tc.abi, tc.minor, tc.marker, err, tc.want)
		}
	}
}
