package openai

import (
	"encoding/base64"
	"strings"
	"unsafe"
)

// imageMediaTypes maps the media types a data URL may declare to their canonical form.
// "image/jpg" is not registered, but clients send it.
var imageMediaTypes = map[string]string{
	"image/png":  "image/png",
	"image/jpeg": "image/jpeg",
	"image/jpg":  "image/jpeg",
}

// Strict decoders refuse non-zero padding bits, so that every accepted payload has exactly one
// encoding; line breaks (CR, LF) are skipped by every base64 decoder.
var (
	stdStrict = base64.StdEncoding.Strict()
	rawStrict = base64.RawStdEncoding.Strict()
)

// DecodeDataURL decodes an RFC 2397 data URL carrying a PNG or JPEG image in base64, such as
// "data:image/png;base64,iVBORw0K...". It returns the declared media type in canonical form
// (image/jpg becomes image/jpeg) and the decoded bytes.
//
// The scheme, media type and "base64" token are case-insensitive; parameters between the media
// type and ";base64" are allowed and ignored. The payload uses the standard alphabet, with or
// without padding, and may contain line breaks. The declared media type is only checked against
// the accepted list: the runtime reads the real format from the bytes.
//
// A returned error is an [*Error] with an empty Param, and it never quotes the payload.
func DecodeDataURL(u string) (mediaType string, data []byte, err error) {
	const scheme = "data:"
	if len(u) < len(scheme) || !strings.EqualFold(u[:len(scheme)], scheme) {
		return "", nil, errorf(CodeInvalidImageURL, "", "the image URL is not a data: URL")
	}
	rest := u[len(scheme):]
	header, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, errorf(CodeInvalidImageURL, "", "the data URL has no ',' before its payload")
	}
	semi := strings.LastIndexByte(header, ';')
	if semi < 0 || !strings.EqualFold(strings.TrimSpace(header[semi+1:]), "base64") {
		return "", nil, errorf(CodeInvalidImageURL, "", "the data URL must be base64-encoded (data:<media type>;base64,<payload>)")
	}
	mt := header[:semi]
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		for p := range strings.SplitSeq(mt[i+1:], ";") {
			if strings.IndexByte(p, '=') <= 0 {
				return "", nil, errorf(CodeInvalidImageURL, "", "the data URL has a malformed parameter before ;base64")
			}
		}
		mt = mt[:i]
	}
	mt = strings.TrimSpace(mt)
	if mt == "" {
		return "", nil, errorf(CodeUnsupportedImageFormat, "", "the data URL declares no media type; use image/png or image/jpeg")
	}
	canon, ok := imageMediaTypes[strings.ToLower(mt)]
	if !ok {
		if tok, safe := safeToken(mt); safe {
			return "", nil, errorf(CodeUnsupportedImageFormat, "", "the data URL declares %s; only image/png and image/jpeg are accepted", tok)
		}
		return "", nil, errorf(CodeUnsupportedImageFormat, "", "the data URL's media type is not accepted; use image/png or image/jpeg")
	}
	data, err = decodeBase64(payload)
	if err != nil {
		return "", nil, err
	}
	return canon, data, nil
}

func decodeBase64(payload string) ([]byte, error) {
	n := len(payload) - strings.Count(payload, "\n") - strings.Count(payload, "\r")
	enc := stdStrict
	if n%4 != 0 && strings.IndexByte(payload, '=') < 0 {
		enc = rawStrict
	}
	dst := make([]byte, enc.DecodedLen(n))
	// The decoder only reads its input: a view of the string spares a copy of the payload.
	got, err := enc.Decode(dst, unsafe.Slice(unsafe.StringData(payload), len(payload)))
	if err != nil {
		// The offset is safe to report; the bytes around it are not.
		return nil, errorf(CodeInvalidImageURL, "", "the data URL's base64 payload is malformed (%v)", err)
	}
	if got == 0 { // an empty payload, or one of line breaks only
		return nil, errorf(CodeImageEmpty, "", "the data URL carries no image bytes")
	}
	return dst[:got], nil
}

// safeToken returns s when it looks like a media type (short, token characters only), so that
// an error may name what the client declared without echoing arbitrary bytes.
func safeToken(s string) (string, bool) {
	if len(s) > 64 {
		return "", false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$&^_.+-/", c) >= 0:
		default:
			return "", false
		}
	}
	return strings.ToLower(s), true
}
