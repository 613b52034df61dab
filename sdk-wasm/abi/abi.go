// Package abi is the contract between the Iris plugin host and a family plugin: the ABI version,
// the names of the exports, the wire types that cross the sandbox boundary and their encoding.
//
// It is the only package both sides share (wazero's api pattern): the host in
// core/internal/plugin and the guest SDK in sdk-wasm/vlm import it, nothing else of each other.
//
// # The ABI (versions 1 and 2)
//
// "The plugin decides, the host executes": a plugin never sees pixels. It receives the image
// header and the bundle's parameters and answers with a declarative [Plan] (geometry, filter,
// normalisation, patch layout, exact image-token count, position grid) or a typed [Error]; it
// receives the question and the plan and answers with a [Frame] (prompt pieces around the image
// span, stop tokens, decode hints). The host executes the plan with native pixel code.
//
// ABI 2 adds several views of one image ([Plan.Views]: each its own crop, resize, region of the
// resized image, pad, normalisation and patch layout, e.g. InternVL's 448×448 tiles and
// thumbnail) and several image spans in the prompt ([Frame.Spans]). Wire minor 3 adds to views
// what a family of padded crops needs: a patch mask ([View.Mask], the patches the encoder
// attends to), a float resize of the normalised canvas ([View.FloatResize]) and separator
// tokens in the image span ([Plan.SeparatorTokens]), Phi-4-multimodal's HD crops and global
// view. Wire minor 4 adds a first resize before a view's resize ([View.PreResize]):
// LocateAnything's token-limit shrink followed by its stretch to multiples of 28. Everything else is ABI 1, unchanged: the exports, the memory protocol, the single-view
// plan and the single span. A plugin says which vocabulary it speaks in [Description.ABI]; a
// host that speaks 2 serves both.
//
// A plugin is a WASI reactor (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared) exporting:
//
//	_initialize            ()                → ()      runtime and package init, run once per instance
//	iris_abi_vN            ()                → ()      the version marker; its name carries the version
//	iris_alloc             (n i32)           → ptr i32 a guest-owned buffer of n bytes, or 0
//	iris_reset             ()                → ()      releases every buffer handed out since the last reset
//	iris_describe          ()                → i64     packed (ptr<<32 | len) of a Response[Description]
//	iris_plan              (ptr i32, n i32)  → i64     PlanRequest in, packed Response[Plan] out
//	iris_frame             (ptr i32, n i32)  → i64     FrameRequest in, packed Response[Frame] out
//
// # Memory protocol
//
// The guest's own allocator owns its memory (the proxy-wasm direction). For each call the host
// asks iris_alloc for a buffer, writes the request into it, calls the operation, and copies the
// response out of guest memory (a [Packed] pointer and length) before it calls iris_reset. Every
// buffer stays valid until iris_reset; the host never frees guest memory itself. A packed result
// of 0 means the guest could not produce a response at all (the host treats it as malformed
// output). Messages are at most [MaxMessageBytes] in either direction.
//
// # Encoding
//
// Messages use a small hand-written binary format (see codec.go): fields in declaration order,
// varints, length-prefixed strings, no reflection, decoded strictly (wrong kinds, trailing
// bytes, bad UTF-8, out-of-range counts are errors), so a plan this host cannot execute
// faithfully is refused instead of half understood. Pixels never cross, so messages stay small.
// The Go types carry JSON tags for logs and test files only; JSON is not the wire format.
//
// # Versioning
//
// The major version is in the marker's name: the highest ABI the module's SDK speaks (this SDK
// exports [ExportMarker], iris_abi_v2). [Description.ABI] is the one the plugin speaks, at most
// the marker's. A host loads a module whose marker is between [MinVersion] and [Version] and
// refuses any other with "speaks ABI vN, this host speaks v1 to v2"; it refuses an ABI-1 plugin
// that answers with views or spans. Host-side validation ([Plan.Validate], [Frame.Validate])
// treats everything a plugin says as untrusted.
package abi

import (
	"strconv"
	"strings"
)

// Version is the newest ABI major version this package describes; MinVersion the oldest it
// still serves.
const (
	Version    = 2
	MinVersion = 1
)

// Export names. The exports are the same in ABI 1 and 2; only the marker's name differs.
const (
	// MarkerPrefix starts the name of every version marker; the version number follows.
	MarkerPrefix = "iris_abi_v"
	// ExportMarker is this version's marker: MarkerPrefix + "2".
	ExportMarker     = "iris_abi_v2"
	ExportInitialize = "_initialize"
	ExportAlloc      = "iris_alloc"
	ExportReset      = "iris_reset"
	ExportDescribe   = "iris_describe"
	ExportPlan       = "iris_plan"
	ExportFrame      = "iris_frame"
)

// MaxMessageBytes bounds a request or response on the wire.
const MaxMessageBytes = 1 << 20

// MarkerVersion returns the version N of an export named iris_abi_vN, and false for any other name.
func MarkerVersion(export string) (int, bool) {
	rest, ok := strings.CutPrefix(export, MarkerPrefix)
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 6 {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// Pack joins a guest pointer and length into the i64 an operation returns.
func Pack(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// Unpack splits an operation's i64 result into a guest pointer and length.
func Unpack(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v) }
