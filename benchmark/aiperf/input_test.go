package aiperf

import (
	"strings"
	"testing"
)

const img = `"data:image/png;base64,AAAA"`

func TestReadSingleTurn(t *testing.T) {
	in := strings.Join([]string{
		`{"session_id":"a","text":"q1","image":` + img + `,"output_length":10}`,
		``,
		`{"texts":["q2"],"images":[` + img + `],"role":"user","extra":{"top_k":1,"temperature":0}}`,
		`{"type":"single_turn","texts":[{"name":"t","contents":["q3"]}],"images":[{"name":"i","contents":[` + img + `]}],"timestamp":null}`,
	}, "\n")
	rows, err := ReadSingleTurn(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.SessionID != "a" || r.Text != "q1" || r.OutputLength != 10 || r.Line != 1 {
		t.Errorf("row 0 %+v", r)
	}
	if r := rows[1]; r.SessionID != "session_000001" || r.Text != "q2" || len(r.Extra) != 2 || r.Extra[0].Key != "top_k" || r.Line != 3 {
		t.Errorf("row 1 %+v", r)
	}
	if r := rows[2]; r.Text != "q3" || r.Image != strings.Trim(img, `"`) {
		t.Errorf("row 2 %+v", r)
	}
}

func TestReadSingleTurnRefuses(t *testing.T) {
	tests := []struct{ line, want string }{
		{`{"text":"q"}`, "exactly one image"},
		{`{"image":` + img + `}`, "exactly one text"},
		{`{"text":"q","texts":["r"],"image":` + img + `}`, "exactly one text, got 2"},
		{`{"text":"q","images":[` + img + `,` + img + `]}`, "exactly one image, got 2"},
		{`{"text":"q","image":"pic.png"}`, "data: URI"},
		{`{"text":"q","image":` + img + `,"audio":"x"}`, `"audio" is not supported`},
		{`{"text":"q","image":` + img + `,"timestamp":5}`, `"timestamp" is not supported`},
		{`{"text":"q","image":` + img + `,"role":"system"}`, "only user turns"},
		{`{"text":"q","image":` + img + `,"output_length":0}`, "at least 1"},
		{`{"text":"q","image":` + img + `,"type":"multi_turn"}`, "not single_turn"},
		{`[1]`, "not a JSON object"},
		{`{"text":"q","image":` + img + `,"extra":[1]}`, "extra"},
	}
	for _, tt := range tests {
		_, err := ReadSingleTurn(strings.NewReader(tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: err %v, want %q", tt.line, err, tt.want)
		}
	}
	if _, err := ReadSingleTurn(strings.NewReader("\n\n")); err == nil {
		t.Error("an empty file was accepted")
	}
}
