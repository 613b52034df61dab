//go:build tools

// Package deploy pins, in go.mod and go.sum, the Gateway API module whose HTTPRoute CRD
// deploy/scripts/schemas.sh converts to a JSON schema; no build compiles this file.
package deploy

import _ "sigs.k8s.io/gateway-api/apis/v1"
