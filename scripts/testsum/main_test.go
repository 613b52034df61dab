package main

import (
	"strings"
	"testing"
)

// TestSummarise feeds a canned `go test -json` stream: passing tests stay quiet, a failing
// subtest's output is printed, a build error passes through, and the counts and verdict are right.
func TestSummarise(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestOK"}`,
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"    quiet log\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestOK"}`,
		`{"Action":"skip","Package":"p","Test":"TestGPU"}`,
		`{"Action":"output","Package":"p","Test":"TestBad/sub","Output":"    a_test.go:6: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestBad/sub"}`,
		`{"Action":"fail","Package":"p","Test":"TestBad"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/x.go:3: undefined: y\n"}`,
		`# a line go wrote to stderr`,
	}, "\n")
	var out strings.Builder
	c, failed, err := summarise(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Passed != 1 || c.Failed != 2 || c.Skip != 1 || !failed {
		t.Errorf("counts %+v failed %v", c, failed)
	}
	for _, want := range []string{"a_test.go:6: boom", "FAIL\tp", "undefined: y", "# a line go wrote"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, hidden := range []string{"quiet log", "=== RUN"} {
		if strings.Contains(out.String(), hidden) {
			t.Errorf("output shows %q:\n%s", hidden, out.String())
		}
	}
}
