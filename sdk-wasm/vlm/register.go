package vlm

// registered serves the plugin the wasm exports answer for. A reactor module holds exactly one
// plugin and an instance is single-threaded, so a package variable set once in init is the
// registry.
var registered *Server

// Register makes p the plugin this module serves. Call it once, from init.
// A second call panics: a module serves exactly one family.
func Register(p Plugin) {
	if registered != nil {
		panic("vlm: Register called twice")
	}
	if p == nil {
		panic("vlm: Register called with a nil plugin")
	}
	registered = NewServer(p)
}
