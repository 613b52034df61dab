//go:build !goexperiment.jsonv2

package openai

import "encoding/json"

// unmarshalWire decodes a request body (see the jsonv2 build for why it is a function).
func unmarshalWire(body []byte, w *wireRequest) error { return json.Unmarshal(body, w) }
