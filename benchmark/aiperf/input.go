package aiperf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Row is one line of a single_turn input file reduced to what a one-image chat request needs:
// one question and one image.
type Row struct {
	// Line is the 1-based line number in the file.
	Line int
	// SessionID is the row's session_id, or session_NNNNNN (its 0-based index) when absent; it
	// becomes the record's conversation_id.
	SessionID string
	Text      string
	// Image is the image value as written: a data URI (the profiler sends it verbatim).
	Image string
	// OutputLength is the row's output_length (sent as max_completion_tokens); 0 when absent.
	OutputLength int
	// Extra holds the row's extra body fields in file order.
	Extra []Field
}

// Field is one JSON object member, kept in order.
type Field struct {
	Key   string
	Value json.RawMessage
}

// maxLine bounds one input line; images travel inline as base64.
const maxLine = 256 << 20

// ReadSingleTurn reads an AIPerf single_turn JSONL file (aiperf dataset/loader/models.py
// SingleTurn) whose rows each carry exactly one text and one image. Fields AIPerf accepts but a
// one-image closed-loop run cannot honour (audio, video, timestamps, several images) are refused
// with the line number.
func ReadSingleTurn(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	var rows []Row
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		row, err := parseRow(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		row.Line = line
		if row.SessionID == "" {
			row.SessionID = fmt.Sprintf("session_%06d", len(rows))
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("read input: no rows")
	}
	return rows, nil
}

func parseRow(b []byte) (Row, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Row{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var row Row
	var texts, images []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := raw[k]
		var err error
		switch k {
		case "type":
			var t string
			if err = json.Unmarshal(v, &t); err == nil && t != "single_turn" {
				err = fmt.Errorf("type %q is not single_turn", t)
			}
		case "session_id":
			err = json.Unmarshal(v, &row.SessionID)
		case "text":
			var t *string
			if err = json.Unmarshal(v, &t); err == nil && t != nil {
				texts = append(texts, *t)
			}
		case "texts":
			texts, err = contents(v, texts)
		case "image":
			var t *string
			if err = json.Unmarshal(v, &t); err == nil && t != nil {
				images = append(images, *t)
			}
		case "images":
			images, err = contents(v, images)
		case "output_length":
			err = json.Unmarshal(v, &row.OutputLength)
			if err == nil && row.OutputLength < 1 {
				err = errors.New("output_length must be at least 1")
			}
		case "role":
			var role *string
			if err = json.Unmarshal(v, &role); err == nil && role != nil && *role != "user" {
				err = fmt.Errorf("role %q: only user turns are sent", *role)
			}
		case "extra":
			row.Extra, err = orderedObject(v)
		default:
			if string(v) == "null" {
				continue
			}
			err = fmt.Errorf("field %q is not supported (one text and one image per row)", k)
		}
		if err != nil {
			return Row{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	if len(texts) != 1 {
		return Row{}, fmt.Errorf("want exactly one text, got %d", len(texts))
	}
	if len(images) != 1 {
		return Row{}, fmt.Errorf("want exactly one image, got %d", len(images))
	}
	row.Text, row.Image = texts[0], images[0]
	if !strings.HasPrefix(strings.ToLower(row.Image), "data:") {
		return Row{}, errors.New("image must be a data: URI with the file's original bytes (local paths are re-encoded by AIPerf)")
	}
	return row, nil
}

// contents reads a list of strings or a list of {"name","contents":[...]} objects.
func contents(v json.RawMessage, acc []string) ([]string, error) {
	var strs []string
	if err := json.Unmarshal(v, &strs); err == nil {
		return append(acc, strs...), nil
	}
	var named []struct {
		Contents []string `json:"contents"`
	}
	if err := json.Unmarshal(v, &named); err != nil {
		return nil, errors.New("want a list of strings or of {name, contents} objects")
	}
	for _, n := range named {
		acc = append(acc, n.Contents...)
	}
	return acc, nil
}

// orderedObject decodes a JSON object keeping its members in order.
func orderedObject(v json.RawMessage) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want a JSON object")
	}
	var out []Field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, Field{Key: k.(string), Value: val})
	}
	return out, nil
}

// InputsEntry is one session of inputs.json.
type InputsEntry struct {
	SessionID string            `json:"session_id"`
	Payloads  []json.RawMessage `json:"payloads"`
}

// WriteInputs writes inputs.json ({"data":[{"session_id","payloads":[body]}]}) indented as
// AIPerf writes it, so that AIPerf can replay the exact bodies (--custom-dataset-type
// inputs_json).
func WriteInputs(w io.Writer, entries []InputsEntry) error {
	if entries == nil {
		entries = []InputsEntry{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		Data []InputsEntry `json:"data"`
	}{entries}); err != nil {
		return fmt.Errorf("write inputs.json: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
