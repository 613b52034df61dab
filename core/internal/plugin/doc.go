// Package plugin runs family plugins: WebAssembly modules speaking sdk-wasm/abi v1, sandboxed by
// wazero. It is the only importer of wazero.
//
// A [Host] owns what plugins share: the compilation cache (on disk, so a restart does not
// recompile; in memory, so two bundles with the same plugin digest compile it once), metrics and
// tracing. [Host.Load] checks and compiles a module and returns a [Plugin], whose [Plugin.Plan]
// and [Plugin.Frame] run on a pool of instances.
//
// # Sandbox
//
//   - Every instance gets WASI with no file system, no sockets, no arguments and no environment;
//     stdin is empty, and the first bytes a call writes to stdout/stderr are kept for its error
//     report. Modules importing anything outside wasi_snapshot_preview1 are refused at load.
//   - Clocks and randomness are deterministic: a fixed wall clock, wazero's fake monotonic clock
//     (1 ms per reading), no-op sleep, and a fixed-seed random source per instance.
//   - Memory is capped per plugin ([Limits.MemoryPages], from the bundle).
//   - Each call runs under a deadline ([Limits.Timeout], from the bundle) with wazero's
//     CloseOnContextDone, so a runaway guest is stopped; starting an instance has its own bound
//     ([Limits.StartTimeout]), so a slow start-up under load does not eat a call's budget.
//   - A call that traps, times out, runs out of memory or answers garbage discards its instance
//     and fails with an [*Error] carrying a clear code; other calls, on other instances, carry on.
//
// # Concurrency
//
// A wazero module instance is not goroutine-safe, so each call takes an instance from the
// plugin's pool for its whole duration; at most [Limits.Instances] calls run at once and the rest
// wait (bounded by their context). Plugin methods are safe for concurrent use.
package plugin
