package main

import (
	"slices"
	"strings"
	"testing"
)

func TestCommonPrefix(t *testing.T) {
	for _, tc := range []struct {
		a, b []int32
		want int
	}{
		{nil, nil, 0},
		{[]int32{1, 2, 3}, nil, 0},
		{[]int32{1, 2, 3}, []int32{1, 2, 3}, 3},
		{[]int32{1, 2, 3}, []int32{1, 2, 3, 151645}, 3}, // cut by max_tokens before the stop token
		{[]int32{1, 2, 3, 151645}, []int32{1, 2}, 2},
		{[]int32{1, 9, 3}, []int32{1, 2, 3}, 1}, // nothing after the first difference counts
		{[]int32{9}, []int32{1}, 0},
	} {
		if got := commonPrefix(tc.a, tc.b); got != tc.want {
			t.Errorf("commonPrefix(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestJoin(t *testing.T) {
	scenes := []scene{
		{Index: 0, Question: "What colour?", Answer: "green", Type: "colour", Image: "0.png"},
		{Index: 0, Question: "How many?", Answer: "3", Type: "count", Image: "0.png"},
		{Index: 1, Question: "What colour?", Answer: "red", Type: "colour", Image: "1.png"},
	}
	ref := func(index int, q, got string) refRow {
		return refRow{Index: index, Question: q, Got: got, Tokens: []int32{1}}
	}
	full := []refRow{ref(0, "What colour?", "green"), ref(0, "How many?", "3"), ref(1, "What colour?", "red")}
	for _, tc := range []struct {
		name    string
		refs    []refRow
		withRef bool
		wantErr string
	}{
		{name: "no reference", withRef: false},
		{name: "every item once", refs: full, withRef: true},
		{name: "extra rows ignored", refs: append(full[:3:3], ref(7, "Other?", "x")), withRef: true},
		{name: "missing row", refs: full[:2], withRef: true, wantErr: `1 scene items have no reference row, the first: index 1, question "What colour?"`},
		{name: "same question, other index", refs: []refRow{full[0], full[1], ref(2, "What colour?", "red")}, withRef: true, wantErr: "index 1"},
		{name: "duplicate row", refs: append(full[:3:3], ref(0, "How many?", "4")), withRef: true, wantErr: `two rows for index 0, question "How many?"`},
		{name: "empty reference", refs: nil, withRef: true, wantErr: "3 scene items have no reference row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := join(scenes, tc.refs, tc.withRef)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range items {
				if it.Expected != scenes[i].Answer || it.image != scenes[i].Image {
					t.Errorf("item %d: %+v", i, it)
				}
				if (it.Reference != nil) != tc.withRef || tc.withRef && *it.Reference != scenes[i].Answer {
					t.Errorf("item %d: reference %v", i, it.Reference)
				}
			}
		})
	}
}

// answered is an item with its answer and reference.
func answered(typ, expected, got string, ids []int32, ref *string, refIDs []int32) *item {
	return &item{Type: typ, Expected: expected, Got: got, TokenIDs: ids, Reference: ref, ReferenceTokens: refIDs}
}

func TestSummarize(t *testing.T) {
	green, red := "green", "red"
	items := []*item{
		// right and the same as the reference, stop token included on both sides
		answered("colour", "green", "green", []int32{1, 2, 151645}, &green, []int32{1, 2, 151645}),
		// right, the reference's ids differ after the first
		answered("colour", "red", "red", []int32{3, 4}, &red, []int32{3, 5}),
		// wrong but the reference's answer
		answered("colour", "blue", "green", []int32{1, 2, 151645}, &green, []int32{1, 2, 151645}),
		// exact: a trailing space is wrong, and unlike the reference
		answered("count", "3", "3 ", []int32{6, 7}, ptr("3"), []int32{6, 151645}),
		// a failed request: wrong, unlike the reference even where its answer is empty
		{Type: "count", Expected: "4", Error: "HTTP 500", Reference: ptr(""), ReferenceTokens: []int32{151645}},
	}
	s := summarize(items, true)
	if len(s.Types) != 2 || s.Types[0].Type != "colour" || s.Types[1].Type != "count" {
		t.Fatalf("types %+v", s.Types)
	}
	for _, tc := range []struct {
		name string
		got  tally
		want tally
	}{
		{"colour", s.Types[0], tally{Type: "colour", Items: 3, Correct: 2, Accuracy: 2.0 / 3, SameAnswer: 3, AnswerAgreement: 1,
			PrefixTokens: 3 + 1 + 3, ReferenceTokens: 8, TokenAgreement: 7.0 / 8, SameTokens: 2}},
		{"count", s.Types[1], tally{Type: "count", Items: 2, Correct: 0, Errors: 1, SameAnswer: 0,
			PrefixTokens: 1, ReferenceTokens: 3, TokenAgreement: 1.0 / 3}},
		{"overall", s.Overall, tally{Items: 5, Correct: 2, Errors: 1, Accuracy: 0.4, SameAnswer: 3, AnswerAgreement: 0.6,
			PrefixTokens: 8, ReferenceTokens: 11, TokenAgreement: 8.0 / 11, SameTokens: 2}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, tc.got, tc.want)
		}
	}
	var differ []int
	for i, it := range items {
		if it.differs() {
			differ = append(differ, i)
		}
	}
	if want := []int{1, 2, 3, 4}; !slices.Equal(differ, want) {
		t.Errorf("differing items %v, want %v", differ, want)
	}
}

func TestGates(t *testing.T) {
	pass := summary{Reference: true, Overall: tally{Items: 100, Correct: 96, Accuracy: 0.96, SameAnswer: 100, AnswerAgreement: 1,
		PrefixTokens: 300, ReferenceTokens: 300, TokenAgreement: 1, SameTokens: 100}}
	off := summary{Reference: true, Overall: tally{Items: 100, Correct: 90, Accuracy: 0.9, SameAnswer: 97, AnswerAgreement: 0.97,
		PrefixTokens: 290, ReferenceTokens: 300, TokenAgreement: 290.0 / 300, SameTokens: 95}}
	for _, tc := range []struct {
		name string
		g    gates
		s    summary
		want string // "" passes; else a part of the reason
	}{
		{"none", gates{}, off, ""},
		{"none, empty run", gates{}, summary{}, ""},
		{"accuracy passes", gates{MinAccuracy: 0.95}, pass, ""},
		{"accuracy at the bound", gates{MinAccuracy: 0.96}, pass, ""},
		{"accuracy fails", gates{MinAccuracy: 0.95}, off, "accuracy 0.9000 (90/100) < 0.95"},
		{"accuracy, empty run", gates{MinAccuracy: 0.5}, summary{}, "accuracy 0.0000 (0/0)"},
		{"reference required, all same", gates{RequireReference: true}, pass, ""},
		{"reference required, 3 differ", gates{RequireReference: true}, off, "3 of 100 answers differ from the reference"},
		{"answer agreement passes", gates{MinAnswerAgreement: 0.95}, off, ""},
		{"answer agreement fails", gates{MinAnswerAgreement: 0.99}, off, "answer agreement 0.9700 (97/100) < 0.99"},
		{"token agreement passes", gates{MinTokenAgreement: 0.95}, off, ""},
		{"token agreement fails", gates{MinTokenAgreement: 0.99}, off, "token agreement 0.9667 (290/300) < 0.99"},
		{"token agreement, no reference tokens", gates{MinTokenAgreement: 0.5}, summary{Reference: true, Overall: tally{Items: 1}}, "token agreement"},
		{"every failure listed", gates{MinAccuracy: 0.95, RequireReference: true, MinTokenAgreement: 0.99}, off, "accuracy 0.9000 (90/100) < 0.95; 3 of 100 answers differ from the reference; token agreement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.g.check(tc.s)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("check = %q, want %q", got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
