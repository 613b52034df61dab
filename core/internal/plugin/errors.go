package plugin

import (
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Codes of the host-side failures a call can end with. Refusals and failures the plugin itself
// reports are *abi.Error values with the plugin's own code, returned unchanged.
const (
	// CodeTimeout: the call ran past its deadline; the instance was closed and discarded.
	CodeTimeout = "plugin_timeout"
	// CodeCanceled: the caller's context was canceled during the call.
	CodeCanceled = "plugin_canceled"
	// CodeTrap: the guest trapped or exited (a Go runtime fatal error, an unreachable, a bad access).
	CodeTrap = "plugin_trap"
	// CodeOutOfMemory: the guest ran out of its memory page cap.
	CodeOutOfMemory = "plugin_out_of_memory"
	// CodeBadOutput: the guest answered with something that breaks the ABI contract.
	CodeBadOutput = "plugin_bad_output"
	// CodeClosed: the plugin was closed (its bundle unloaded).
	CodeClosed = "plugin_closed"
)

// ErrIncompatible marks a module that is not an Iris plugin of this host's ABI version.
var ErrIncompatible = errors.New("incompatible plugin module")

// Error is a call that failed on the host's side of the boundary: the instance misbehaved, ran
// out of time or memory, or answered with garbage. The server keeps serving; the instance that
// failed is discarded.
type Error struct {
	Plugin string
	// Op is the operation: "describe", "plan" or "frame".
	Op   string
	Code string
	// Err carries the detail for logs (wazero's error, the guest's last stderr lines). It is not
	// meant for clients.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("plugin %s: %s: %s: %v", e.Plugin, e.Op, e.Code, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of a plugin call error: the host's code for an *Error, the plugin's
// code for an *abi.Error, and "" otherwise.
func CodeOf(err error) string {
	var he *Error
	if errors.As(err, &he) {
		return he.Code
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}
