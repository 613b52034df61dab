// Package core is the Iris runtime: it opens bundles, routes each request to the task the bundle
// declares, and runs it through the family plugin, the tokenizer and the engine.
//
// core is transport-agnostic: the gateway maps HTTP onto [Request] and [Event], and the profiler
// reaches the very same path in-process, so one request type serves every caller.
package core
