package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// scene is one question of the scene set (scenes.jsonl); other fields are ignored.
type scene struct {
	Image    string `json:"image"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Type     string `json:"type"`
	Index    int    `json:"index"`
}

// refRow is one answer of the reference run.
type refRow struct {
	Index    int     `json:"index"`
	Question string  `json:"question"`
	Got      string  `json:"got"`
	Tokens   []int32 `json:"tokens"`
}

// key joins the reference to the scenes.
type key struct {
	index    int
	question string
}

// readScenes reads scenes.jsonl; every item needs its image and question.
func readScenes(path string) ([]scene, error) {
	var out []scene
	err := readJSONL(path, func(raw []byte) error {
		var s scene
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		if s.Image == "" || s.Question == "" {
			return errors.New("an item needs its image and question")
		}
		out = append(out, s)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s: no items", path)
	}
	return out, err
}

func readReference(path string) ([]refRow, error) {
	var out []refRow
	err := readJSONL(path, func(raw []byte) error {
		var r refRow
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// readJSONL calls fn with each non-blank line of path; an error names the file and the line.
func readJSONL(path string, fn func(raw []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20) // a line may carry large unused fields
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if err := fn(raw); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// join makes the scenes' items and gives each its reference row, matched on (index, question):
// with a reference, every item must have exactly one row. Rows of no item are ignored (a
// reference of a larger set).
func join(scenes []scene, refs []refRow, withRef bool) ([]*item, error) {
	byKey := make(map[key]*refRow, len(refs))
	for i := range refs {
		k := key{refs[i].Index, refs[i].Question}
		if _, dup := byKey[k]; dup {
			return nil, fmt.Errorf("the reference has two rows for index %d, question %q", k.index, k.question)
		}
		byKey[k] = &refs[i]
	}
	items := make([]*item, len(scenes))
	var missing []key
	for i, s := range scenes {
		it := &item{Index: s.Index, Type: s.Type, Question: s.Question, Expected: s.Answer, image: s.Image}
		if withRef {
			r, ok := byKey[key{s.Index, s.Question}]
			if !ok {
				missing = append(missing, key{s.Index, s.Question})
			} else {
				it.Reference, it.ReferenceTokens = &r.Got, r.Tokens
			}
		}
		items[i] = it
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%d scene items have no reference row, the first: index %d, question %q", len(missing), missing[0].index, missing[0].question)
	}
	return items, nil
}

// readImage reads an image file as a data URL.
func readImage(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading an image: %w", err)
	}
	mt := http.DetectContentType(b)
	if mt != "image/png" && mt != "image/jpeg" {
		return "", fmt.Errorf("%s is %s, not a PNG or JPEG image", path, mt)
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}
