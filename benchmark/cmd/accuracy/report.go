package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// listed is how many wrong or differing items the report shows.
const listed = 20

// writeReport writes the table of types and the overall line, then the first wrong or differing
// items. Strings are quoted: the comparison is exact, so spaces and newlines matter.
func writeReport(w io.Writer, s summary, items []*item) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "type\titems\tcorrect\taccuracy\terrors\t"
	if s.Reference {
		head += "same answer\tanswer agr.\ttoken agr.\tsame tokens\t"
	}
	fmt.Fprintln(tw, head)
	row := func(t tally, name string) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%d\t", name, t.Items, t.Correct, t.Accuracy, t.Errors)
		if s.Reference {
			fmt.Fprintf(tw, "%d\t%.4f\t%.4f\t%d\t", t.SameAnswer, t.AnswerAgreement, t.TokenAgreement, t.SameTokens)
		}
		fmt.Fprintln(tw)
	}
	for _, t := range s.Types {
		row(t, t.Type)
	}
	row(s.Overall, "overall")
	_ = tw.Flush()
	if s.Reference {
		o := s.Overall
		fmt.Fprintf(w, "token agreement: %d of the reference's %d tokens in the common prefixes\n", o.PrefixTokens, o.ReferenceTokens)
	}

	var bad []*item
	for _, it := range items {
		if it.differs() {
			bad = append(bad, it)
		}
	}
	if len(bad) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwrong or differing: %d (the first %d)\n", len(bad), min(len(bad), listed))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head = "index\ttype\tquestion\texpected\tgot"
	if s.Reference {
		head += "\treference\tprefix"
	}
	fmt.Fprintln(tw, head)
	for _, it := range bad[:min(len(bad), listed)] {
		got := fmt.Sprintf("%q", it.Got)
		if it.Error != "" {
			got = "error: " + it.Error
		}
		fmt.Fprintf(tw, "%d\t%s\t%q\t%q\t%s", it.Index, it.Type, it.Question, it.Expected, got)
		if it.Reference != nil {
			fmt.Fprintf(tw, "\t%q\t%d/%d", *it.Reference, it.CommonPrefix, len(it.ReferenceTokens))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// report is the JSON file: the run's settings, the summary, the gates' verdict and every item.
type report struct {
	URL       string  `json:"url"`
	Model     string  `json:"model"`
	Scenes    string  `json:"scenes"`
	Reference string  `json:"reference,omitempty"`
	MaxTokens int     `json:"max_tokens"`
	Summary   summary `json:"summary"`
	Gates     gates   `json:"gates"`
	// Failed is why the gates failed; empty when they passed.
	Failed string  `json:"failed,omitempty"`
	Items  []*item `json:"items"`
}

func writeJSON(path string, o *options, s summary, items []*item, failed string) error {
	b, err := json.MarshalIndent(report{URL: o.url, Model: o.model, Scenes: o.scenes, Reference: o.reference,
		MaxTokens: o.maxTokens, Summary: s, Gates: o.gates, Failed: failed, Items: items}, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
