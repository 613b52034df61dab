package main

import (
	"fmt"
	"slices"
	"strings"
)

// item is one question and, once asked, the server's answer: a row of the JSON report.
type item struct {
	Index    int    `json:"index"`
	Type     string `json:"type"`
	Question string `json:"question"`
	Expected string `json:"expected"`
	// Got is the message content; Error the request's failure (the item then counts as wrong
	// and as differing from the reference).
	Got          string  `json:"got"`
	TokenIDs     []int32 `json:"token_ids"`
	FinishReason string  `json:"finish_reason,omitempty"`
	Error        string  `json:"error,omitempty"`
	Correct      bool    `json:"correct"`
	// Reference is the reference's answer text, ReferenceTokens its ids; nil without a
	// reference.
	Reference       *string `json:"reference,omitempty"`
	ReferenceTokens []int32 `json:"reference_tokens,omitempty"`
	SameAnswer      bool    `json:"same_answer"`
	// CommonPrefix is the length of the common prefix of TokenIDs and ReferenceTokens;
	// SameTokens whether the two are equal.
	CommonPrefix int  `json:"common_prefix"`
	SameTokens   bool `json:"same_tokens"`

	image string // the image's file name in the scene set
}

// grade scores an answered item: exact match with the expected answer, and with the reference.
func (it *item) grade() {
	ok := it.Error == ""
	it.Correct = ok && it.Got == it.Expected
	if it.Reference == nil {
		return
	}
	it.SameAnswer = ok && it.Got == *it.Reference
	it.CommonPrefix = commonPrefix(it.TokenIDs, it.ReferenceTokens)
	it.SameTokens = ok && slices.Equal(it.TokenIDs, it.ReferenceTokens)
}

// differs says whether the item is worth listing: wrong, failed, or unlike the reference.
func (it *item) differs() bool {
	return !it.Correct || it.Reference != nil && (!it.SameAnswer || !it.SameTokens)
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// tally sums the items of one type, or of all.
type tally struct {
	Type     string  `json:"type,omitempty"`
	Items    int     `json:"items"`
	Correct  int     `json:"correct"`
	Errors   int     `json:"errors"`
	Accuracy float64 `json:"accuracy"`
	// With a reference: answers equal to the reference's (and their fraction), the summed
	// common prefixes over the reference's summed ids, and items with the same ids.
	SameAnswer      int     `json:"same_answer"`
	AnswerAgreement float64 `json:"answer_agreement"`
	PrefixTokens    int     `json:"prefix_tokens"`
	ReferenceTokens int     `json:"reference_tokens"`
	TokenAgreement  float64 `json:"token_agreement"`
	SameTokens      int     `json:"same_tokens"`
}

func (t *tally) add(it *item) {
	t.Items++
	t.Correct += b2i(it.Correct)
	t.Errors += b2i(it.Error != "")
	t.SameAnswer += b2i(it.SameAnswer)
	t.PrefixTokens += it.CommonPrefix
	t.ReferenceTokens += len(it.ReferenceTokens)
	t.SameTokens += b2i(it.SameTokens)
	t.Accuracy = ratio(t.Correct, t.Items)
	t.AnswerAgreement = ratio(t.SameAnswer, t.Items)
	t.TokenAgreement = ratio(t.PrefixTokens, t.ReferenceTokens)
}

// summary is the run's result: per type (sorted by name) and overall.
type summary struct {
	Reference bool    `json:"with_reference"`
	Types     []tally `json:"types"`
	Overall   tally   `json:"overall"`
}

// summarize grades every item and sums them.
func summarize(items []*item, withRef bool) summary {
	s := summary{Reference: withRef}
	byType := map[string]*tally{}
	for _, it := range items {
		it.grade()
		t := byType[it.Type]
		if t == nil {
			t = &tally{Type: it.Type}
			byType[it.Type] = t
		}
		t.add(it)
		s.Overall.add(it)
	}
	for _, t := range byType {
		s.Types = append(s.Types, *t)
	}
	slices.SortFunc(s.Types, func(a, b tally) int { return strings.Compare(a.Type, b.Type) })
	return s
}

// gates are the pass conditions; zero values are off.
type gates struct {
	MinAccuracy        float64 `json:"min_accuracy,omitempty"`
	RequireReference   bool    `json:"require_reference,omitempty"`
	MinAnswerAgreement float64 `json:"min_answer_agreement,omitempty"`
	MinTokenAgreement  float64 `json:"min_token_agreement,omitempty"`
}

func (g gates) needReference() bool {
	return g.RequireReference || g.MinAnswerAgreement > 0 || g.MinTokenAgreement > 0
}

// check returns why the run fails its gates, on one line; "" when it passes. An empty run
// fails every gate that is on.
func (g gates) check(s summary) string {
	o := s.Overall
	var fails []string
	if g.MinAccuracy > 0 && (o.Items == 0 || o.Accuracy < g.MinAccuracy) {
		fails = append(fails, fmt.Sprintf("accuracy %.4f (%d/%d) < %g", o.Accuracy, o.Correct, o.Items, g.MinAccuracy))
	}
	if g.RequireReference && (o.Items == 0 || o.SameAnswer < o.Items) {
		fails = append(fails, fmt.Sprintf("%d of %d answers differ from the reference", o.Items-o.SameAnswer, o.Items))
	}
	if g.MinAnswerAgreement > 0 && (o.Items == 0 || o.AnswerAgreement < g.MinAnswerAgreement) {
		fails = append(fails, fmt.Sprintf("answer agreement %.4f (%d/%d) < %g", o.AnswerAgreement, o.SameAnswer, o.Items, g.MinAnswerAgreement))
	}
	if g.MinTokenAgreement > 0 && (o.ReferenceTokens == 0 || o.TokenAgreement < g.MinTokenAgreement) {
		fails = append(fails, fmt.Sprintf("token agreement %.4f (%d/%d) < %g", o.TokenAgreement, o.PrefixTokens, o.ReferenceTokens, g.MinTokenAgreement))
	}
	return strings.Join(fails, "; ")
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
