package main

import (
	"slices"
	"testing"
)

func TestInts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false},
		{"1,8,54", []int{1, 8, 54}, false},
		{"64", []int{64}, false},
		{"1,,8", nil, true},
		{"0,8", nil, true},
		{"-1", nil, true},
		{"a", nil, true},
		{"1, 8", nil, true},
	} {
		got, err := ints("decodes", tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("ints(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
