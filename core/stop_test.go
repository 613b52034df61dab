package core

import (
	"strings"
	"testing"
)

// TestStopper feeds answers piece by piece (as a detokenizer hands them out) and checks what is
// emitted at each step, the answer, and that only a possible start of a stop string is held.
func TestStopper(t *testing.T) {
	cases := []struct {
		name   string
		stops  []string
		pieces []string
		// out is what each push returns; flush the final flush (when no stop was hit).
		out    []string
		answer string
		hit    bool
	}{
		{name: "no stop in text", stops: []string{"END"}, pieces: []string{"a cat", " sat"},
			out: []string{"a cat", " sat"}, answer: "a cat sat"},
		{name: "inside one piece", stops: []string{"\n"}, pieces: []string{"one\ntwo"},
			out: []string{"one"}, answer: "one", hit: true},
		{name: "spans pieces", stops: []string{"STOP"}, pieces: []string{"go S", "T", "OP now"},
			out: []string{"go ", "", ""}, answer: "go ", hit: true},
		{name: "false start released", stops: []string{"STOP"}, pieces: []string{"go ST", "ART"},
			out: []string{"go ", "START"}, answer: "go START"},
		{name: "held until the end", stops: []string{"STOP"}, pieces: []string{"go ST"},
			out: []string{"go "}, answer: "go ST"},
		{name: "earliest of several", stops: []string{"cd", "b"}, pieces: []string{"abcd"},
			out: []string{"a"}, answer: "a", hit: true},
		{name: "at the very start", stops: []string{"x"}, pieces: []string{"xyz"},
			out: []string{""}, answer: "", hit: true},
		{name: "shorter partial inside a longer one", stops: []string{"abc", "bd"}, pieces: []string{"zab", "d"},
			out: []string{"z", "a"}, answer: "za", hit: true},
		{name: "overlapping partials", stops: []string{"aab"}, pieces: []string{"aa", "a", "ab"},
			out: []string{"", "a", "a"}, answer: "aa", hit: true},
		{name: "multibyte", stops: []string{"東京"}, pieces: []string{"in 東", "京 now"},
			out: []string{"in ", ""}, answer: "in ", hit: true},
		{name: "after a hit nothing", stops: []string{"."}, pieces: []string{"a.", "b"},
			out: []string{"a", ""}, answer: "a", hit: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &stopper{stops: c.stops}
			hit := false
			for i, p := range c.pieces {
				out, h := s.push(p)
				if out != c.out[i] {
					t.Errorf("push %q: %q, want %q", p, out, c.out[i])
				}
				hit = hit || h
			}
			if !hit {
				s.flush()
			}
			if hit != c.hit || s.text() != c.answer {
				t.Errorf("answer %q hit %t, want %q %t", s.text(), hit, c.answer, c.hit)
			}
			if !c.hit && s.text() != strings.Join(c.pieces, "") {
				t.Errorf("without a stop the answer %q must be the whole text", s.text())
			}
		})
	}
}

func TestCheckStop(t *testing.T) {
	for _, c := range []struct {
		stop []string
		ok   bool
	}{
		{nil, true}, {[]string{"a", "b", "c", "d"}, true}, {[]string{"a", "b", "c", "d", "e"}, false},
		{[]string{""}, false}, {[]string{strings.Repeat("x", MaxStopStringBytes)}, true},
		{[]string{strings.Repeat("x", MaxStopStringBytes+1)}, false},
	} {
		if err := checkStop(c.stop); (err == nil) != c.ok {
			t.Errorf("checkStop(%q): %v", c.stop, err)
		}
	}
}
