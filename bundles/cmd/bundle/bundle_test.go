package bundle

import (
	"reflect"
	"testing"
)

func TestParamFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    map[string]any
		wantErr bool
	}{
		{[]string{"max_patches=1"}, map[string]any{"max_patches": int64(1)}, false},
		{[]string{"max_patches=1", "min_patches=2"}, map[string]any{"max_patches": int64(1), "min_patches": int64(2)}, false},
		{[]string{"scale=0.5", "crop=true", "mode=tiles"}, map[string]any{"scale": 0.5, "crop": true, "mode": "tiles"}, false},
		{[]string{"max_patches=1", "max_patches=3"}, map[string]any{"max_patches": int64(3)}, false},
		{[]string{"max_patches"}, nil, true},
		{[]string{"=1"}, nil, true},
	}
	for _, tt := range tests {
		var p paramFlag
		var err error
		for _, a := range tt.args {
			if err = p.Set(a); err != nil {
				break
			}
		}
		if (err != nil) != tt.wantErr {
			t.Fatalf("%v: error %v, want error %v", tt.args, err, tt.wantErr)
		}
		if !tt.wantErr && !reflect.DeepEqual(p.m, tt.want) {
			t.Fatalf("%v: %v, want %v", tt.args, p.m, tt.want)
		}
	}
}
