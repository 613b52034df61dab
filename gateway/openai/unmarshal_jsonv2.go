//go:build goexperiment.jsonv2

package openai

import (
	"encoding/json"
	jsonv2 "encoding/json/v2"
)

// unmarshalWire decodes a request body. encoding/json's legacy error semantics validate the
// whole body before decoding it, which scans the image's base64 string twice (about a fifth of a
// request's parsing); decoding with v1 semantics but v2 error reporting scans it once. The
// values decoded are the same; a body that fails is decoded again the legacy way, so that its
// error is the one decodeError knows.
func unmarshalWire(body []byte, w *wireRequest) error {
	//nolint:govet // stdversion dates the options to go1.27; this file builds only with the experiment that has them
	if jsonv2.Unmarshal(body, w, json.DefaultOptionsV1(), json.ReportErrorsWithLegacySemantics(false)) == nil {
		return nil
	}
	*w = wireRequest{}
	return json.Unmarshal(body, w)
}
