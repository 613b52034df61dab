// Command testsum reads `go test -json` (stdout and stderr together) and prints what plain
// `go test` prints (package results, build errors, the output of failing tests only), then a
// total of the tests passed, failed and skipped (subtests included); with -tally it appends that
// total to a file, and `testsum -total FILE` prints the sum of a file's lines (the end of
// `just test`). It exits 1 when a test or a package failed, so that a pipe keeps go test's verdict.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type counts struct {
	Label  string `json:"label"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
	Skip   int    `json:"skipped"`
}

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped (subtests included)", c.Passed, c.Failed, c.Skip)
}

func main() {
	label := flag.String("label", "go test", "name of this run in the summary line and the tally")
	tally := flag.String("tally", "", "append this run's counts to FILE (one JSON line)")
	total := flag.String("total", "", "print the sum of FILE's counts and exit (1 if any failed)")
	flag.Parse()
	if *total != "" {
		c, err := sum(*total)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		fmt.Printf("Go tests, total: %s\n", c)
		if c.Failed > 0 {
			os.Exit(1)
		}
		return
	}
	c, failed, err := summarise(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	c.Label = *label
	fmt.Printf("Go tests, %s: %s\n", c.Label, c)
	if *tally != "" {
		if err := appendTally(*tally, c); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// summarise copies the readable part of a `go test -json` stream to w and counts the tests.
// failed reports a failed test or package.
func summarise(r io.Reader, w io.Writer) (c counts, failed bool, err error) {
	buf := map[string]*strings.Builder{} // the output of each running test, by package and name
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not an event: go's own stderr, passed through
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "output":
			if e.Test == "" {
				if e.Output != "PASS\n" {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			if strings.HasPrefix(e.Output, "=== ") { // RUN, PAUSE, CONT, NAME: plain go test hides them
				continue
			}
			b := buf[key]
			if b == nil {
				b = &strings.Builder{}
				buf[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				failed = failed || e.Action == "fail"
				continue
			}
			switch e.Action {
			case "pass":
				c.Passed++
			case "skip":
				c.Skip++
			case "fail":
				c.Failed++
				failed = true
				if b := buf[key]; b != nil {
					fmt.Fprint(w, b.String())
				}
			}
			delete(buf, key)
		}
	}
	return c, failed, sc.Err()
}

func appendTally(path string, c counts) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(c)
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

func sum(path string) (counts, error) {
	f, err := os.Open(path)
	if err != nil {
		return counts{}, err
	}
	defer f.Close()
	var t counts
	dec := json.NewDecoder(f)
	for {
		var c counts
		if err := dec.Decode(&c); errors.Is(err, io.EOF) {
			return t, nil
		} else if err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		t.Passed += c.Passed
		t.Failed += c.Failed
		t.Skip += c.Skip
	}
}
