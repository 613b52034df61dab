package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

// pngURL is a data URL of a real 2x2 PNG.
var pngURL = "data:image/png;base64," + base64.StdEncoding.EncodeToString(encodePNG(2, 2))

func encodePNG(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 40), uint8(y * 30), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// body builds a request body: the message content is given as raw JSON, extra top-level keys as
// raw JSON members (`"k":v,...`).
func body(content, extra string) string {
	s := `{"model":"m","messages":[{"role":"user","content":` + content + `}]`
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

func parts(ps ...string) string { return "[" + strings.Join(ps, ",") + "]" }

const textPart = `{"type":"text","text":"What is in the image?"}`

func imagePart(url string) string {
	return `{"type":"image_url","image_url":{"url":` + quote(url) + `}}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var okContent = parts(textPart, imagePart(pngURL))

// parseCases are the table cases; they also seed FuzzChatRequest.
var parseCases = []struct {
	name      string
	body      string
	wantCode  string
	wantParam string
	// wantMsg is a fragment of the refusal's message: it tells apart the checks that share a
	// code and a param.
	wantMsg string
	check   func(t *testing.T, r *Request)
}{
	{name: "text then image", body: body(okContent, `"max_tokens":16,"temperature":0,"top_k":1,"top_p":0.5,"seed":7,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"user":"u1"`),
		check: func(t *testing.T, r *Request) {
			if r.Model != "m" || r.Text != "What is in the image?" || !r.TextFirst || r.MaxTokens != 16 || r.MaxTokensParam != "max_tokens" {
				t.Errorf("request %+v", r)
			}
			if *r.Temperature != 0 || *r.TopK != 1 || *r.TopP != 0.5 || *r.Seed != 7 || !r.Stream || !r.IncludeUsage || !r.IgnoreEOS || r.User != "u1" {
				t.Errorf("params %+v", r)
			}
			if r.Image == nil || r.Image.MediaType != "image/png" || !bytes.Equal(r.Image.Data, encodePNG(2, 2)) {
				t.Fatalf("image %+v", r.Image)
			}
			if r.Image.Param != "messages[0].content[1].image_url.url" {
				t.Errorf("image param %q", r.Image.Param)
			}
		}},
	{name: "image then text", body: body(parts(imagePart(pngURL), textPart), ""),
		check: func(t *testing.T, r *Request) {
			if r.TextFirst || r.Image == nil || r.Image.Param != "messages[0].content[0].image_url.url" {
				t.Errorf("request %+v", r)
			}
			if r.Temperature != nil || r.TopK != nil || r.TopP != nil || r.Seed != nil || r.MaxTokens != 0 || r.Stream {
				t.Errorf("defaults %+v", r)
			}
		}},
	{name: "aiperf body", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"Q"},{"type":"image_url","image_url":{"url":"` + pngURL + `"},"uuid":"x"}]}],"model":"m","stream":true,"max_completion_tokens":16,"temperature":0,"top_k":1,"ignore_eos":true,"min_tokens":16,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		check: func(t *testing.T, r *Request) {
			if r.MaxTokens != 16 || r.MaxTokensParam != "max_completion_tokens" || !r.IncludeUsage {
				t.Errorf("request %+v", r)
			}
		}},
	{name: "plain string content", body: body(`"Hello there"`, ""),
		check: func(t *testing.T, r *Request) {
			if r.Image != nil || r.Text != "Hello there" || !r.TextFirst {
				t.Errorf("request %+v", r)
			}
		}},
	{name: "text part only", body: body(parts(textPart), ""),
		check: func(t *testing.T, r *Request) {
			if r.Image != nil || r.Text == "" {
				t.Errorf("request %+v", r)
			}
		}},
	{name: "unknown keys ignored", body: body(okContent, `"frequency_penalty":0.5,"metadata":{"a":1},"n":1,"stop":null,"tools":[],"logprobs":false,"tool_choice":"none","response_format":{"type":"text"}`)},
	{name: "image/jpg accepted", body: body(parts(textPart, imagePart(strings.Replace(pngURL, "image/png", "image/jpg", 1))), ""),
		check: func(t *testing.T, r *Request) {
			if r.Image.MediaType != "image/jpeg" {
				t.Errorf("media type %q", r.Image.MediaType)
			}
		}},
	{name: "escaped slashes in url", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":`+strings.ReplaceAll(quote(pngURL), "/", `\/`)+`}}`), ""),
		check: func(t *testing.T, r *Request) {
			if !bytes.Equal(r.Image.Data, encodePNG(2, 2)) {
				t.Error("image bytes differ")
			}
		}},
	{name: "remote url kept for the server", body: body(parts(textPart, imagePart("https://img.example.com/cat.png")), ""),
		check: func(t *testing.T, r *Request) {
			if r.Image.URL == nil || r.Image.URL.Host != "img.example.com" || r.Image.Data != nil {
				t.Errorf("image %+v", r.Image)
			}
		}},
	{name: "equal max tokens", body: body(okContent, `"max_tokens":5,"max_completion_tokens":5`)},

	{name: "empty body", body: ``, wantCode: CodeInvalidJSON, wantMsg: "the request body is empty; send a JSON object"},
	{name: "malformed json", body: `{"model":"m",`, wantCode: CodeInvalidJSON, wantMsg: "the request body is not valid JSON (error at byte 13)"},
	{name: "body not an object", body: `[1,2]`, wantCode: CodeInvalidType, wantMsg: "the request body must be a JSON object"},
	{name: "body null", body: `null`, wantCode: CodeInvalidType, wantMsg: "the request body must be a JSON object"},
	{name: "missing model", body: `{"messages":[{"role":"user","content":"hi"}]}`, wantCode: CodeMissingParameter, wantParam: "model", wantMsg: "model is required: name a model listed by GET /v1/models"},
	{name: "model not a string", body: `{"model":3,"messages":[{"role":"user","content":"hi"}]}`, wantCode: CodeInvalidType, wantParam: "model", wantMsg: "model must be a string"},
	{name: "model too long", body: `{"model":"` + strings.Repeat("m", 300) + `","messages":[{"role":"user","content":"hi"}]}`, wantCode: CodeInvalidValue, wantParam: "model", wantMsg: "model names are at most 256 bytes"},
	{name: "missing messages", body: `{"model":"m"}`, wantCode: CodeMissingParameter, wantParam: "messages", wantMsg: "messages is required: send one user message"},
	{name: "messages not an array", body: `{"model":"m","messages":"hi"}`, wantCode: CodeInvalidType, wantParam: "messages", wantMsg: "messages must be an array of messages"},
	{name: "message not an object", body: `{"model":"m","messages":[3]}`, wantCode: CodeInvalidType, wantParam: "messages[0]", wantMsg: "a message must be an object"},
	{name: "no messages", body: `{"model":"m","messages":[]}`, wantCode: CodeUnsupportedMessages, wantParam: "messages", wantMsg: "got 0 messages"},
	{name: "two messages", body: `{"model":"m","messages":[{"role":"user","content":"s"},{"role":"user","content":"hi"}]}`, wantCode: CodeUnsupportedMessages, wantParam: "messages", wantMsg: "got 2 messages"},
	{name: "system role", body: `{"model":"m","messages":[{"role":"system","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "a system message must be followed by one user message"},
	{name: "developer role", body: `{"model":"m","messages":[{"role":"developer","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "a developer message must be followed by one user message"},
	{name: "assistant role", body: `{"model":"m","messages":[{"role":"assistant","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "assistant messages are not supported: send one user message"},
	{name: "unknown role", body: `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: `unknown role; only "user" and one "system" before it are served`},
	{name: "missing role", body: `{"model":"m","messages":[{"content":"hi"}]}`, wantCode: CodeMissingParameter, wantParam: "messages[0].role", wantMsg: `the message needs a role; "user" is served, after at most one "system" message`},
	{name: "missing content", body: `{"model":"m","messages":[{"role":"user"}]}`, wantCode: CodeMissingParameter, wantParam: "messages[0].content", wantMsg: "the message needs content: a text part with the question and at most one image_url part"},
	{name: "content a number", body: body(`7`, ""), wantCode: CodeInvalidType, wantParam: "messages[0].content", wantMsg: "content must be a string or an array of content parts"},
	{name: "empty string content", body: body(`""`, ""), wantCode: CodeMissingText, wantParam: "messages[0].content", wantMsg: "the question is empty"},
	{name: "empty parts", body: body(`[]`, ""), wantCode: CodeMissingText, wantParam: "messages[0].content", wantMsg: "the message needs one text part with the question"},
	{name: "image only", body: body(parts(imagePart(pngURL)), ""), wantCode: CodeMissingText, wantParam: "messages[0].content", wantMsg: "the message needs one text part with the question"},
	{name: "empty text part", body: body(parts(`{"type":"text","text":""}`, imagePart(pngURL)), ""), wantCode: CodeMissingText, wantParam: "messages[0].content[0].text", wantMsg: "the question is empty"},
	{name: "text part without text", body: body(parts(`{"type":"text"}`, imagePart(pngURL)), ""), wantCode: CodeMissingParameter, wantParam: "messages[0].content[0].text", wantMsg: "a text part needs its text"},
	{name: "text not a string", body: body(parts(`{"type":"text","text":5}`), ""), wantCode: CodeInvalidType, wantParam: "messages[0].content[0].text", wantMsg: "messages[0].content[0].text must be a string"},
	{name: "two text parts", body: body(parts(textPart, imagePart(pngURL), textPart), ""), wantCode: CodeTooManyTextParts, wantParam: "messages[0].content[2]", wantMsg: "the message may hold one text part; put the whole question in it"},
	{name: "two images", body: body(parts(textPart, imagePart(pngURL), imagePart(pngURL)), ""), wantCode: CodeTooManyImages, wantParam: "messages[0].content[2]", wantMsg: "Iris answers about one image per request; send one image_url part"},
	{name: "part not an object", body: body(parts(textPart, `"x"`), ""), wantCode: CodeInvalidType, wantParam: "messages[0].content[1]", wantMsg: "a content part must be an object"},
	{name: "part without type", body: body(parts(`{"text":"q"}`), ""), wantCode: CodeMissingParameter, wantParam: "messages[0].content[0].type", wantMsg: `every content part needs a type: "text" or "image_url"`},
	{name: "audio part", body: body(parts(textPart, `{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`), ""), wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[1].type", wantMsg: "audio parts are not supported"},
	{name: "video part", body: body(parts(textPart, `{"type":"video_url","video_url":{"url":"x"}}`), ""), wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[1].type", wantMsg: "video parts are not supported"},
	{name: "file part", body: body(parts(textPart, `{"type":"file","file":{"file_id":"f"}}`), ""), wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[1].type", wantMsg: "file parts are not supported"},
	{name: "unknown part", body: body(parts(textPart, `{"type":"hologram"}`), ""), wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[1].type", wantMsg: `unknown content part type "hologram"; use "text" and "image_url"`},
	{name: "image_url not an object", body: body(parts(textPart, `{"type":"image_url","image_url":"`+pngURL+`"}`), ""), wantCode: CodeInvalidType, wantParam: "messages[0].content[1].image_url", wantMsg: "image_url must be an object with a url"},
	{name: "image_url missing", body: body(parts(textPart, `{"type":"image_url"}`), ""), wantCode: CodeMissingParameter, wantParam: "messages[0].content[1].image_url", wantMsg: "an image_url part needs an image_url object with a url"},
	{name: "image url missing", body: body(parts(textPart, `{"type":"image_url","image_url":{}}`), ""), wantCode: CodeMissingParameter, wantParam: "messages[0].content[1].image_url.url", wantMsg: "an image_url part needs a url"},
	{name: "image url not a string", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":1}}`), ""), wantCode: CodeInvalidType, wantParam: "messages[0].content[1].image_url.url", wantMsg: "messages[0].content[1].image_url.url must be a string"},
	{name: "NUL in text", body: body(parts(`{"type":"text","text":"a\u0000b"}`, imagePart(pngURL)), ""), wantCode: CodeInvalidValue, wantParam: "messages[0].content[0].text", wantMsg: "the text contains a NUL character"},
	{name: "NUL in string content", body: body(`"a\u0000b"`, ""), wantCode: CodeInvalidValue, wantParam: "messages[0].content", wantMsg: "the text contains a NUL character"},
	{name: "malformed base64", body: body(parts(textPart, imagePart("data:image/png;base64,iVBOR$$w0K")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the data URL's base64 payload is malformed (illegal base64 data at input byte 5)"},
	{name: "gif media type", body: body(parts(textPart, imagePart("data:image/gif;base64,R0lGODlh")), ""), wantCode: CodeUnsupportedImageFormat, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the data URL declares image/gif; only image/png and image/jpeg are accepted"},
	{name: "not base64", body: body(parts(textPart, imagePart("data:image/png,rawbytes")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the data URL must be base64-encoded (data:<media type>;base64,<payload>)"},
	{name: "empty data url", body: body(parts(textPart, imagePart("data:image/png;base64,")), ""), wantCode: CodeImageEmpty, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the data URL carries no image bytes"},
	{name: "file url", body: body(parts(textPart, imagePart("file:///etc/passwd")), ""), wantCode: CodeImageURLNotAllowed, wantParam: "messages[0].content[1].image_url.url", wantMsg: "file URLs are never read; send the image inline as a data: URL"},
	{name: "ftp url", body: body(parts(textPart, imagePart("ftp://h/x.png")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the image URL must be a data: URL (data:image/png;base64,...)"},
	{name: "http url with credentials", body: body(parts(textPart, imagePart("https://u:p@h/x.png")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the image URL is not a valid http(s) URL with a host and no credentials"},
	{name: "n 2", body: body(okContent, `"n":2`), wantCode: CodeUnsupportedParameter, wantParam: "n", wantMsg: "n must be 1: Iris returns one choice"},
	{name: "n string", body: body(okContent, `"n":"2"`), wantCode: CodeInvalidType, wantParam: "n", wantMsg: "n must be an integer"},
	{name: "system then user", body: `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":` + okContent + `}]}`,
		check: func(t *testing.T, r *Request) {
			if r.System == nil || *r.System != "Be brief." || r.Image == nil || r.Image.Param != "messages[1].content[1].image_url.url" {
				t.Errorf("request %+v", r)
			}
		}},
	{name: "developer parts then user", body: `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, r *Request) {
			if r.System == nil || *r.System != "ab" || r.Text != "hi" {
				t.Errorf("request %+v", r)
			}
		}},
	{name: "empty system kept", body: `{"model":"m","messages":[{"role":"system","content":""},{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, r *Request) {
			if r.System == nil || *r.System != "" {
				t.Errorf("system %v", r.System)
			}
		}},
	{name: "no system", body: body(okContent, ""), check: func(t *testing.T, r *Request) {
		if r.System != nil {
			t.Errorf("system %q", *r.System)
		}
	}},
	{name: "system alone", body: `{"model":"m","messages":[{"role":"system","content":"x"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "a system message must be followed by one user message"},
	{name: "two systems", body: `{"model":"m","messages":[{"role":"system","content":"x"},{"role":"system","content":"y"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[1].role", wantMsg: "a system message must be followed by one user message"},
	{name: "system then assistant", body: `{"model":"m","messages":[{"role":"system","content":"x"},{"role":"assistant","content":"y"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[1].role", wantMsg: "assistant messages are not supported: send one user message"},
	{name: "user then system", body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"system","content":"y"}]}`, wantCode: CodeUnsupportedMessages, wantParam: "messages", wantMsg: "got 2 messages"},
	{name: "system user assistant", body: `{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":"y"},{"role":"assistant","content":"z"}]}`, wantCode: CodeUnsupportedMessages, wantParam: "messages", wantMsg: "got 3 messages"},
	{name: "assistant history", body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"z"}]}`, wantCode: CodeUnsupportedMessages, wantParam: "messages", wantMsg: "got 3 messages"},
	{name: "system content number", body: `{"model":"m","messages":[{"role":"system","content":1},{"role":"user","content":"y"}]}`, wantCode: CodeInvalidType, wantParam: "messages[0].content", wantMsg: "content must be a string or an array of text parts"},
	{name: "system content missing", body: `{"model":"m","messages":[{"role":"system"},{"role":"user","content":"y"}]}`, wantCode: CodeMissingParameter, wantParam: "messages[0].content", wantMsg: "the system message needs content"},
	{name: "system image part", body: `{"model":"m","messages":[{"role":"system","content":[` + imagePart(pngURL) + `]},{"role":"user","content":"y"}]}`, wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[0].type", wantMsg: "a system message holds text parts only"},
	{name: "system NUL", body: `{"model":"m","messages":[{"role":"system","content":"a\u0000"},{"role":"user","content":"y"}]}`, wantCode: CodeInvalidValue, wantParam: "messages[0].content", wantMsg: "the system message contains a NUL character"},
	{name: "user errors name messages[1]", body: `{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":[` + imagePart(pngURL) + `]}]}`, wantCode: CodeMissingText, wantParam: "messages[1].content", wantMsg: "the message needs one text part with the question"},
	{name: "detail and pixel range", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":`+quote(pngURL)+`,"detail":"low"}}`), `"min_pixels":100,"max_pixels":200`),
		check: func(t *testing.T, r *Request) {
			if r.Image.Detail != "low" || r.MinPixels != 100 || r.MaxPixels != 200 || r.Image.DetailParam() != "messages[0].content[1].image_url.detail" {
				t.Errorf("request %+v, image %+v", r, r.Image)
			}
		}},
	{name: "detail null", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":`+quote(pngURL)+`,"detail":null}}`), ``)},
	{name: "detail unknown", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":`+quote(pngURL)+`,"detail":"max"}}`), ``), wantCode: CodeInvalidValue, wantParam: "messages[0].content[1].image_url.detail", wantMsg: `detail must be "auto", "low" or "high"`},
	{name: "detail bool", body: body(parts(textPart, `{"type":"image_url","image_url":{"url":`+quote(pngURL)+`,"detail":true}}`), ``), wantCode: CodeInvalidType, wantParam: "messages[0].content[1].image_url.detail", wantMsg: "messages[0].content[1].image_url.detail must be a string"},
	{name: "min_pixels zero", body: body(okContent, `"min_pixels":0`), wantCode: CodeInvalidValue, wantParam: "min_pixels", wantMsg: "min_pixels must be in [1, 1099511627776]"},
	{name: "max_pixels huge", body: body(okContent, `"max_pixels":1099511627777`), wantCode: CodeInvalidValue, wantParam: "max_pixels", wantMsg: "max_pixels must be in [1, 1099511627776]"},
	{name: "min over max pixels", body: body(okContent, `"min_pixels":3,"max_pixels":2`), wantCode: CodeConflictingParameters, wantParam: "max_pixels", wantMsg: "min_pixels is over max_pixels"},
	{name: "max_pixels string", body: body(okContent, `"max_pixels":"2"`), wantCode: CodeInvalidType, wantParam: "max_pixels", wantMsg: "max_pixels must be an integer"},
	{name: "stop string", body: body(okContent, `"stop":"\n"`), check: func(t *testing.T, r *Request) {
		if len(r.Stop) != 1 || r.Stop[0] != "\n" {
			t.Errorf("stop %q", r.Stop)
		}
	}},
	{name: "stop array of four", body: body(okContent, `"stop":["a","b b","東京","\n\n"]`), check: func(t *testing.T, r *Request) {
		if len(r.Stop) != 4 || r.Stop[2] != "東京" {
			t.Errorf("stop %q", r.Stop)
		}
	}},
	{name: "stop empty forms", body: body(okContent, `"stop":""`), check: func(t *testing.T, r *Request) {
		if r.Stop != nil {
			t.Errorf("stop %q", r.Stop)
		}
	}},
	{name: "stop empty array", body: body(okContent, `"stop":[]`)},
	{name: "stop five", body: body(okContent, `"stop":["a","b","c","d","e"]`), wantCode: CodeInvalidValue, wantParam: "stop", wantMsg: "stop takes at most 4 strings, got 5"},
	{name: "stop empty item", body: body(okContent, `"stop":["a",""]`), wantCode: CodeInvalidValue, wantParam: "stop[1]", wantMsg: "a stop string must not be empty"},
	{name: "stop too long", body: body(okContent, `"stop":["`+strings.Repeat("x", 257)+`"]`), wantCode: CodeInvalidValue, wantParam: "stop[0]", wantMsg: "a stop string is at most 256 bytes"},
	{name: "stop number", body: body(okContent, `"stop":7`), wantCode: CodeInvalidType, wantParam: "stop", wantMsg: "stop must be a string or an array of strings"},
	{name: "stop object", body: body(okContent, `"stop":{"a":1}`), wantCode: CodeInvalidType, wantParam: "stop", wantMsg: "stop must be a string or an array of strings"},
	{name: "stop item number", body: body(okContent, `"stop":["a",1]`), wantCode: CodeInvalidType, wantParam: "stop[1]", wantMsg: "stop[1] must be a string"},
	{name: "tools", body: body(okContent, `"tools":[{"type":"function","function":{"name":"f"}}]`), wantCode: CodeUnsupportedParameter, wantParam: "tools", wantMsg: "tools are not supported"},
	{name: "tool_choice", body: body(okContent, `"tool_choice":"auto"`), wantCode: CodeUnsupportedParameter, wantParam: "tool_choice", wantMsg: "tool_choice is not supported"},
	{name: "functions", body: body(okContent, `"functions":[{"name":"f"}]`), wantCode: CodeUnsupportedParameter, wantParam: "functions", wantMsg: "functions are not supported"},
	{name: "response_format", body: body(okContent, `"response_format":{"type":"json_object"}`), wantCode: CodeUnsupportedParameter, wantParam: "response_format", wantMsg: "response_format is not supported; answers are plain text"},
	{name: "logprobs", body: body(okContent, `"logprobs":true,"top_logprobs":20`), check: func(t *testing.T, r *Request) {
		if !r.Logprobs || r.TopLogprobs != 20 {
			t.Errorf("request %+v", r)
		}
	}},
	{name: "logprobs off", body: body(okContent, `"logprobs":false,"top_logprobs":0`), check: func(t *testing.T, r *Request) {
		if r.Logprobs || r.TopLogprobs != 0 {
			t.Errorf("request %+v", r)
		}
	}},
	{name: "logprobs number", body: body(okContent, `"logprobs":1`), wantCode: CodeInvalidType, wantParam: "logprobs", wantMsg: "logprobs must be a boolean"},
	{name: "top_logprobs without logprobs", body: body(okContent, `"top_logprobs":3`), wantCode: CodeInvalidValue, wantParam: "top_logprobs", wantMsg: `top_logprobs needs "logprobs": true`},
	{name: "top_logprobs 21", body: body(okContent, `"logprobs":true,"top_logprobs":21`), wantCode: CodeInvalidValue, wantParam: "top_logprobs", wantMsg: "top_logprobs must be in [0, 20]"},
	{name: "top_logprobs negative", body: body(okContent, `"logprobs":true,"top_logprobs":-1`), wantCode: CodeInvalidValue, wantParam: "top_logprobs", wantMsg: "top_logprobs must be in [0, 20]"},
	{name: "top_logprobs string", body: body(okContent, `"logprobs":true,"top_logprobs":"3"`), wantCode: CodeInvalidType, wantParam: "top_logprobs", wantMsg: "top_logprobs must be an integer"},
	{name: "reasoning_effort", body: body(okContent, `"reasoning_effort":"low"`), wantCode: CodeUnsupportedParameter, wantParam: "reasoning_effort", wantMsg: "reasoning controls are not supported"},
	{name: "chat_template_kwargs", body: body(okContent, `"chat_template_kwargs":{"enable_thinking":false}`), wantCode: CodeUnsupportedParameter, wantParam: "chat_template_kwargs", wantMsg: "chat_template_kwargs is not supported: the bundle's plugin frames the prompt"},
	{name: "enable_thinking", body: body(okContent, `"enable_thinking":true`), wantCode: CodeUnsupportedParameter, wantParam: "enable_thinking", wantMsg: "thinking controls are not supported"},
	{name: "thinking", body: body(okContent, `"thinking":{"type":"enabled"}`), wantCode: CodeUnsupportedParameter, wantParam: "thinking", wantMsg: "thinking controls are not supported"},
	{name: "max_tokens zero", body: body(okContent, `"max_tokens":0`), wantCode: CodeInvalidValue, wantParam: "max_tokens", wantMsg: "max_tokens must be at least 1"},
	{name: "max_tokens negative", body: body(okContent, `"max_tokens":-3`), wantCode: CodeInvalidValue, wantParam: "max_tokens", wantMsg: "max_tokens must be at least 1"},
	{name: "max_completion_tokens zero", body: body(okContent, `"max_completion_tokens":0`), wantCode: CodeInvalidValue, wantParam: "max_completion_tokens", wantMsg: "max_completion_tokens must be at least 1"},
	{name: "max_tokens string", body: body(okContent, `"max_tokens":"10"`), wantCode: CodeInvalidType, wantParam: "max_tokens", wantMsg: "max_tokens must be an integer"},
	{name: "max_tokens fraction", body: body(okContent, `"max_tokens":1.5`), wantCode: CodeInvalidType, wantParam: "max_tokens", wantMsg: "max_tokens must be an integer"},
	{name: "max_tokens huge", body: body(okContent, `"max_tokens":99999999999999999999999`), wantCode: CodeInvalidValue, wantParam: "max_tokens", wantMsg: "max_tokens is out of range"},
	{name: "max tokens disagree", body: body(okContent, `"max_tokens":5,"max_completion_tokens":6`), wantCode: CodeConflictingParameters, wantParam: "max_completion_tokens", wantMsg: "max_tokens and max_completion_tokens disagree; send one of them"},
	{name: "temperature negative", body: body(okContent, `"temperature":-0.1`), wantCode: CodeInvalidValue, wantParam: "temperature", wantMsg: "temperature must be >= 0"},
	{name: "temperature string", body: body(okContent, `"temperature":"hot"`), wantCode: CodeInvalidType, wantParam: "temperature", wantMsg: "temperature must be a number"},
	{name: "top_k negative", body: body(okContent, `"top_k":-1`), wantCode: CodeInvalidValue, wantParam: "top_k", wantMsg: "top_k must be >= 0 (0 keeps every token)"},
	{name: "top_p zero", body: body(okContent, `"top_p":0`), wantCode: CodeInvalidValue, wantParam: "top_p", wantMsg: "top_p must be in (0, 1]"},
	{name: "top_p over one", body: body(okContent, `"top_p":1.01`), wantCode: CodeInvalidValue, wantParam: "top_p", wantMsg: "top_p must be in (0, 1]"},
	{name: "seed fraction", body: body(okContent, `"seed":0.5`), wantCode: CodeInvalidType, wantParam: "seed", wantMsg: "seed must be an integer"},
	{name: "stream string", body: body(okContent, `"stream":"yes"`), wantCode: CodeInvalidType, wantParam: "stream", wantMsg: "stream must be a boolean"},
	{name: "stream_options not object", body: body(okContent, `"stream_options":true`), wantCode: CodeInvalidType, wantParam: "stream_options", wantMsg: "stream_options must be an object"},
	{name: "include_usage string", body: body(okContent, `"stream_options":{"include_usage":"y"}`), wantCode: CodeInvalidType, wantParam: "stream_options.include_usage", wantMsg: "stream_options.include_usage must be a boolean"},
	{name: "ignore_eos number", body: body(okContent, `"ignore_eos":1`), wantCode: CodeInvalidType, wantParam: "ignore_eos", wantMsg: "ignore_eos must be a boolean"},
	{name: "return_token_ids", body: body(okContent, `"return_token_ids":true`),
		check: func(t *testing.T, r *Request) {
			if !r.ReturnTokenIDs {
				t.Error("return_token_ids not set")
			}
		}},
	{name: "return_token_ids null", body: body(okContent, `"return_token_ids":null`),
		check: func(t *testing.T, r *Request) {
			if r.ReturnTokenIDs {
				t.Error("return_token_ids set by null")
			}
		}},
	{name: "return_token_ids string", body: body(okContent, `"return_token_ids":"true"`), wantCode: CodeInvalidType, wantParam: "return_token_ids", wantMsg: "return_token_ids must be a boolean"},
	{name: "user number", body: body(okContent, `"user":1`), wantCode: CodeInvalidType, wantParam: "user", wantMsg: "user must be a string"},
	{name: "user too long", body: body(okContent, `"user":"`+strings.Repeat("u", 1025)+`"`), wantCode: CodeInvalidValue, wantParam: "user", wantMsg: "user is at most 1024 bytes"},
	{name: "empty model", body: `{"model":"","messages":[{"role":"user","content":"hi"}]}`, wantCode: CodeMissingParameter, wantParam: "model", wantMsg: "model is required: name a model listed by GET /v1/models"},
	{name: "role not a string", body: `{"model":"m","messages":[{"role":5,"content":"hi"}]}`, wantCode: CodeInvalidType, wantParam: "messages[0].role", wantMsg: "messages[0].role must be a string"},
	{name: "tool role", body: `{"model":"m","messages":[{"role":"tool","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "tool messages are not supported: send one user message"},
	{name: "function role", body: `{"model":"m","messages":[{"role":"function","content":"hi"}]}`, wantCode: CodeUnsupportedRole, wantParam: "messages[0].role", wantMsg: "function messages are not supported: send one user message"},
	{name: "system part not an object", body: `{"model":"m","messages":[{"role":"system","content":[5]},{"role":"user","content":"y"}]}`, wantCode: CodeInvalidType, wantParam: "messages[0].content[0]", wantMsg: "a content part must be an object"},
	{name: "system part type not a string", body: `{"model":"m","messages":[{"role":"system","content":[{"type":5}]},{"role":"user","content":"y"}]}`, wantCode: CodeInvalidType, wantParam: "messages[0].content[0].type", wantMsg: "messages[0].content[0].type must be a string"},
	{name: "system text not a string", body: `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":5}]},{"role":"user","content":"y"}]}`, wantCode: CodeInvalidType, wantParam: "messages[0].content[0].text", wantMsg: "messages[0].content[0].text must be a string"},
	{name: "system text missing", body: `{"model":"m","messages":[{"role":"system","content":[{"type":"text"}]},{"role":"user","content":"y"}]}`, wantCode: CodeMissingParameter, wantParam: "messages[0].content[0].text", wantMsg: "a text part needs its text"},
	{name: "part type not a string", body: body(parts(`{"type":5}`), ""), wantCode: CodeInvalidType, wantParam: "messages[0].content[0].type", wantMsg: "messages[0].content[0].type must be a string"},
	{name: "unknown part not named", body: body(parts(textPart, `{"type":"holo gram"}`), ""), wantCode: CodeUnsupportedContentPart, wantParam: "messages[0].content[1].type", wantMsg: `unknown content part type; use "text" and "image_url"`},
	{name: "image url too long", body: body(parts(textPart, imagePart("https://h/"+strings.Repeat("x", 4090))), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "image URLs are at most 4096 bytes"},
	{name: "http url without a host", body: body(parts(textPart, imagePart("http:///x.png")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the image URL is not a valid http(s) URL with a host and no credentials"},
	{name: "http url unparsable", body: body(parts(textPart, imagePart("http://[::1/x.png")), ""), wantCode: CodeInvalidImageURL, wantParam: "messages[0].content[1].image_url.url", wantMsg: "the image URL is not a valid http(s) URL with a host and no credentials"},
	{name: "max_completion_tokens string", body: body(okContent, `"max_completion_tokens":"10"`), wantCode: CodeInvalidType, wantParam: "max_completion_tokens", wantMsg: "max_completion_tokens must be an integer"},
	{name: "temperature out of range", body: body(okContent, `"temperature":1e999`), wantCode: CodeInvalidValue, wantParam: "temperature", wantMsg: "temperature is out of range"},
	{name: "top_p string", body: body(okContent, `"top_p":"x"`), wantCode: CodeInvalidType, wantParam: "top_p", wantMsg: "top_p must be a number"},
	{name: "top_k string", body: body(okContent, `"top_k":"x"`), wantCode: CodeInvalidType, wantParam: "top_k", wantMsg: "top_k must be an integer"},
	{name: "seed huge", body: body(okContent, `"seed":99999999999999999999`), wantCode: CodeInvalidValue, wantParam: "seed", wantMsg: "seed is out of range"},
	{name: "min_pixels string", body: body(okContent, `"min_pixels":"1"`), wantCode: CodeInvalidType, wantParam: "min_pixels", wantMsg: "min_pixels must be an integer"},
	{name: "stop item null", body: body(okContent, `"stop":[null]`), wantCode: CodeInvalidType, wantParam: "stop[0]", wantMsg: "stop[0] is null; a stop string must be a string"},
	{name: "stop string too long", body: body(okContent, `"stop":"`+strings.Repeat("x", 257)+`"`), wantCode: CodeInvalidValue, wantParam: "stop[0]", wantMsg: "a stop string is at most 256 bytes"},
	{name: "n zero", body: body(okContent, `"n":0`), wantCode: CodeUnsupportedParameter, wantParam: "n", wantMsg: "n must be 1: Iris returns one choice"},
	{name: "function_call", body: body(okContent, `"function_call":"auto"`), wantCode: CodeUnsupportedParameter, wantParam: "function_call", wantMsg: "function_call is not supported"},
	{name: "reasoning", body: body(okContent, `"reasoning":{"effort":"low"}`), wantCode: CodeUnsupportedParameter, wantParam: "reasoning", wantMsg: "reasoning controls are not supported"},
	{name: "neutral controls accepted", body: body(okContent, `"tools":{},"functions":"","tool_choice":"none","function_call":null,"reasoning":null,"reasoning_effort":null,"chat_template_kwargs":null,"enable_thinking":null,"thinking":null,"response_format":null`)},
	{name: "body whitespace", body: " \n ", wantCode: CodeInvalidJSON, wantMsg: "the request body is empty; send a JSON object"},
	{name: "body a string", body: `"hi"`, wantCode: CodeInvalidType, wantMsg: "the request body must be a JSON object"},
}

func TestParseChatRequest(t *testing.T) {
	for _, tt := range parseCases {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseChatRequest([]byte(tt.body))
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("ParseChatRequest: %v", err)
				}
				if tt.check != nil {
					tt.check(t, r)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseChatRequest = %+v, %v; want code %s", r, err, tt.wantCode)
			}
			if e.Code != tt.wantCode || e.Param != tt.wantParam || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("error %q (param %q): %s\nwant %s (param %q): %s", e.Code, e.Param, e.Message, tt.wantCode, tt.wantParam, tt.wantMsg)
			}
			if tt.wantMsg == "" {
				t.Fatal("the case names no message")
			}
		})
	}
}

// TestErrorsNeverEchoPayload sends distinctive text and image bytes in refused requests and
// checks that no error message repeats them. Short media-type-like tokens (a part type, a
// declared media type) may be named; anything else may not.
func TestErrorsNeverEchoPayload(t *testing.T) {
	const secret = "SECRETQUESTIONxyz"
	secretB64 := base64.StdEncoding.EncodeToString([]byte("SECRETIMAGEBYTES-0123456789"))
	bodies := []string{
		body(parts(`{"type":"text","text":"`+secret+`"}`, `{"type":"text","text":"`+secret+`"}`), ""),
		body(parts(`{"type":"text","text":"`+secret+`\u0000"}`), ""),
		body(parts(textPart, imagePart("data:image/png;base64,"+secretB64+"$$")), ""),
		body(parts(textPart, imagePart("data:image/"+secret+" q;base64,"+secretB64)), ""),
		body(parts(textPart, imagePart("data:"+secret+secret+secret+secret+secret+";base64,"+secretB64)), ""),
		body(parts(textPart, imagePart("file:///"+secret)), ""),
		body(parts(textPart, `{"type":"`+secret+` q"}`), ""),
		`{"model":"m","messages":[{"role":"` + secret + `","content":"x"}]}`,
	}
	for i, b := range bodies {
		_, err := ParseChatRequest([]byte(b))
		if err == nil {
			t.Fatalf("body %d accepted", i)
		}
		msg := err.Error()
		if strings.Contains(strings.ToLower(msg), strings.ToLower(secret)) || strings.Contains(msg, secretB64[:12]) {
			t.Errorf("body %d: error echoes the payload: %s", i, msg)
		}
	}
}

var dataURLCases = []struct {
	name     string
	url      string
	wantType string
	wantData []byte
	wantCode string
	wantMsg  string
}{
	{"png", "data:image/png;base64,QUJD", "image/png", []byte("ABC"), "", ""},
	{"jpeg", "data:image/jpeg;base64,QUJD", "image/jpeg", []byte("ABC"), "", ""},
	{"jpg alias", "data:image/jpg;base64,QUJD", "image/jpeg", []byte("ABC"), "", ""},
	{"upper case", "DATA:IMAGE/PNG;BASE64,QUJD", "image/png", []byte("ABC"), "", ""},
	{"unpadded", "data:image/png;base64,QUI", "image/png", []byte("AB"), "", ""},
	{"padded", "data:image/png;base64,QUI=", "image/png", []byte("AB"), "", ""},
	{"line breaks", "data:image/png;base64,QU\r\nJD", "image/png", []byte("ABC"), "", ""},
	{"parameter", "data:image/png;name=a.png;base64,QUJD", "image/png", []byte("ABC"), "", ""},
	{"not data", "http://x/y.png", "", nil, CodeInvalidImageURL, "the image URL is not a data: URL"},
	{"no comma", "data:image/png;base64", "", nil, CodeInvalidImageURL, "the data URL has no ',' before its payload"},
	{"no base64 token", "data:image/png,QUJD", "", nil, CodeInvalidImageURL, "the data URL must be base64-encoded"},
	{"bad parameter", "data:image/png;junk;base64,QUJD", "", nil, CodeInvalidImageURL, "the data URL has a malformed parameter before ;base64"},
	{"no media type", "data:;base64,QUJD", "", nil, CodeUnsupportedImageFormat, "the data URL declares no media type"},
	{"webp", "data:image/webp;base64,QUJD", "", nil, CodeUnsupportedImageFormat, "the data URL declares image/webp; only image/png and image/jpeg are accepted"},
	{"svg", "data:image/svg+xml;base64,QUJD", "", nil, CodeUnsupportedImageFormat, "the data URL declares image/svg+xml"},
	{"empty payload", "data:image/png;base64,", "", nil, CodeImageEmpty, "the data URL carries no image bytes"},
	{"only line breaks", "data:image/png;base64,\r\n", "", nil, CodeImageEmpty, "the data URL carries no image bytes"},
	{"bad character", "data:image/png;base64,QU*D", "", nil, CodeInvalidImageURL, "the data URL's base64 payload is malformed"},
	{"url alphabet", "data:image/png;base64,__-_", "", nil, CodeInvalidImageURL, "the data URL's base64 payload is malformed"},
	{"nonzero padding bits", "data:image/png;base64,QUJ=", "", nil, CodeInvalidImageURL, "the data URL's base64 payload is malformed"},
	{"misplaced padding", "data:image/png;base64,Q=JD", "", nil, CodeInvalidImageURL, "the data URL's base64 payload is malformed"},
	{"one char", "data:image/png;base64,Q", "", nil, CodeInvalidImageURL, "the data URL's base64 payload is malformed"},
	{"too short for a scheme", "dat", "", nil, CodeInvalidImageURL, "the image URL is not a data: URL"},
	{"parameter but no base64", "data:image/png;charset=utf-8,QUJD", "", nil, CodeInvalidImageURL, "the data URL must be base64-encoded"},
	{"base64 as the media type", "data:base64,QUJD", "", nil, CodeInvalidImageURL, "the data URL must be base64-encoded"},
	{"media type not named", "data:image/we bp;base64,QUJD", "", nil, CodeUnsupportedImageFormat, "the data URL's media type is not accepted"},
}

func TestDecodeDataURL(t *testing.T) {
	for _, tt := range dataURLCases {
		t.Run(tt.name, func(t *testing.T) {
			mt, data, err := DecodeDataURL(tt.url)
			if tt.wantCode != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) || tt.wantMsg == "" {
					t.Fatalf("DecodeDataURL = %q, %q, %v; want code %s: %s", mt, data, err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil || mt != tt.wantType || !bytes.Equal(data, tt.wantData) {
				t.Fatalf("DecodeDataURL = %q, %q, %v; want %q, %q", mt, data, err, tt.wantType, tt.wantData)
			}
		})
	}
}

func FuzzChatRequest(f *testing.F) {
	for _, tt := range parseCases {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseChatRequest(b)
		if err != nil {
			var e *Error
			if r != nil || !errors.As(err, &e) || e.Code == "" || e.Message == "" {
				t.Fatalf("ParseChatRequest = %+v, %#v", r, err)
			}
			return
		}
		switch {
		case r.Model == "" || len(r.Model) > maxModelNameLen:
			t.Fatalf("accepted model %q", r.Model)
		case r.Text == "" || strings.IndexByte(r.Text, 0) >= 0:
			t.Fatalf("accepted text %q", r.Text)
		case r.MaxTokens < 0 || (r.MaxTokens > 0) != (r.MaxTokensParam != ""):
			t.Fatalf("accepted max tokens %d (%q)", r.MaxTokens, r.MaxTokensParam)
		case r.Temperature != nil && *r.Temperature < 0, r.TopK != nil && *r.TopK < 0,
			r.TopP != nil && !(*r.TopP > 0 && *r.TopP <= 1):
			t.Fatalf("accepted sampling settings %+v", r)
		}
		if img := r.Image; img != nil {
			if (img.URL == nil) == (img.Data == nil) || img.Param == "" {
				t.Fatalf("image %+v", img)
			}
			if img.Data != nil && (len(img.Data) == 0 || imageMediaTypes[img.MediaType] != img.MediaType) {
				t.Fatalf("image data %d bytes, type %q", len(img.Data), img.MediaType)
			}
		}
	})
}

func FuzzDataURL(f *testing.F) {
	for _, tt := range dataURLCases {
		f.Add(tt.url)
	}
	f.Fuzz(func(t *testing.T, u string) {
		mt, data, err := DecodeDataURL(u)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" || mt != "" || data != nil {
				t.Fatalf("DecodeDataURL = %q, %d bytes, %#v", mt, len(data), err)
			}
			return
		}
		if imageMediaTypes[mt] != mt || len(data) == 0 {
			t.Fatalf("accepted type %q with %d bytes", mt, len(data))
		}
		// Strict decoding gives every accepted payload one canonical encoding.
		payload := u[strings.IndexByte(u, ',')+1:]
		payload = strings.ReplaceAll(strings.ReplaceAll(payload, "\r", ""), "\n", "")
		got := base64.RawStdEncoding.EncodeToString(data)
		if want := strings.TrimRight(payload, "="); got != want {
			t.Fatalf("payload %q decodes to bytes that encode as %q", want, got)
		}
	})
}

// BenchmarkParseChatRequestJPEG measures what the gateway does to a typical request body before
// the runtime sees it: decode the JSON, validate it and base64-decode a 426x320 JPEG.
func BenchmarkParseChatRequestJPEG(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 426, 320))
	seed := uint32(1)
	for i := range img.Pix {
		// A smooth gradient plus noise, so that the JPEG has a realistic size.
		seed = seed*1664525 + 1013904223
		img.Pix[i] = uint8(i/7%251) ^ uint8(seed>>28)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
		b.Fatal(err)
	}
	req := ChatCompletionRequest{
		Model: "qwen2.5-vl-3b",
		Messages: []Message{{Role: "user", Content: []ContentPart{
			{Type: "text", Text: "What is the main object in this image? Answer in one word."},
			{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())}},
		}}},
		Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true},
	}
	raw, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("jpeg %d bytes, body %d bytes", buf.Len(), len(raw))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseChatRequest(raw)
		if err != nil || len(r.Image.Data) != buf.Len() {
			b.Fatal(err)
		}
	}
}
