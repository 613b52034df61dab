//go:build tools

// The modules whose CRDs deploy/scripts/schemas.sh converts to JSON schemas: imported here only
// so that go.mod and go.sum pin them; no build compiles this file.
package chartcheck

import (
	_ "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	_ "sigs.k8s.io/gateway-api/apis/v1"
)
