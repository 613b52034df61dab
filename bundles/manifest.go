// Package bundles defines the Iris bundle: a directory holding a model's files, its family plugin
// and bundle.toml, the manifest that declares what the bundle serves and the digest of every file.
//
// The package is pure data: it parses, validates, builds and verifies bundles, and never runs
// anything in them.
package bundles

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// SchemaVersion is the manifest schema this package reads and writes.
const SchemaVersion = 1

// ManifestName is the manifest's file name inside a bundle directory.
const ManifestName = "bundle.toml"

// Task names a capability the bundle declares (same strings as core.Task).
type Task string

// Known tasks.
const (
	TaskVisionLanguage Task = "vision-language-generation"
	TaskText           Task = "text-generation"
)

// Manifest is the content of bundle.toml.
type Manifest struct {
	Schema int    `toml:"schema" json:"schema"`
	Name   string `toml:"name" json:"name"`
	// Family selects the family plugin and graph (e.g. "qwen2_5_vl").
	Family string `toml:"family" json:"family"`
	// Tasks are the declared tasks, primary first; dispatch follows them, never the architecture.
	Tasks      []Task     `toml:"tasks" json:"tasks"`
	Engine     Engine     `toml:"engine" json:"engine"`
	Image      Image      `toml:"image" json:"image"`
	Generation Generation `toml:"generation" json:"generation"`
	Plugin     Plugin     `toml:"plugin" json:"plugin"`
	Tokenizer  Tokenizer  `toml:"tokenizer" json:"tokenizer"`
	// Weights are the safetensors files.
	Weights []File `toml:"weights" json:"weights"`
	// Model holds the other checkpoint files (config.json, preprocessor_config.json, ...).
	Model []File `toml:"model" json:"model"`
}

// Engine says how the model runs.
type Engine struct {
	// Backend is "cpu" or "cuda".
	Backend string `toml:"backend" json:"backend"`
	// Precision is the compute precision: "fp32" or "bf16".
	Precision string `toml:"precision" json:"precision"`
	// ContextLength bounds prompt + image + generated tokens.
	ContextLength int `toml:"context_length" json:"context_length"`
	// Config is the checkpoint's config.json (listed in Model).
	Config string `toml:"config" json:"config"`
}

// Image bounds what an uploaded image may be; anything beyond is refused before decoding.
type Image struct {
	MaxBytes  int64   `toml:"max_bytes" json:"max_bytes"`
	MaxPixels int64   `toml:"max_pixels" json:"max_pixels"`
	MinSide   int     `toml:"min_side" json:"min_side"`
	MaxAspect float64 `toml:"max_aspect" json:"max_aspect"`
	// Read is how the family's reference loads an image file: "" (or ReadLoadImage) as
	// transformers' load_image (EXIF orientation applied, PIL's convert("RGB"): alpha dropped),
	// ReadPILWhite as a loader that opens with PIL without exif_transpose and composites
	// transparency on white (Lance's get_video_tensor_online).
	Read string `toml:"read,omitempty" json:"read,omitempty"`
	// Budgets, when set, let a request choose its image's resolution; without them the
	// plugin's params decide alone.
	Budgets *Budgets `toml:"budgets,omitempty" json:"budgets,omitempty"`
}

// The ways an image file is read (Image.Read).
const (
	ReadLoadImage = "load_image"
	ReadPILWhite  = "pil_over_white"
)

// Budgets are the per-request image resolutions a bundle offers: OpenAI's image_url.detail and
// the min_pixels / max_pixels request extensions. A budget is a [min, max] pair of resized image
// areas in pixels, handed to the family plugin as its min_pixels and max_pixels params (the
// plugin must declare both). A request without one gets the plugin's [plugin.params].
type Budgets struct {
	// Bounds is what the operator allows: every request's budget is clamped into it.
	Bounds [2]int64 `toml:"bounds" json:"bounds"`
	// Low and High are detail "low" and "high"; "auto" is the [plugin.params] default.
	Low  [2]int64 `toml:"low" json:"low"`
	High [2]int64 `toml:"high" json:"high"`
}

// Validate checks that every budget is a [min, max] range inside Bounds.
func (b *Budgets) Validate() error {
	if b.Bounds[0] < 1 || b.Bounds[0] > b.Bounds[1] {
		return invalid("image.budgets.bounds: want 1 <= min <= max, got %v", b.Bounds)
	}
	for name, r := range map[string][2]int64{"low": b.Low, "high": b.High} {
		if r[0] > r[1] || r[0] < b.Bounds[0] || r[1] > b.Bounds[1] {
			return invalid("image.budgets.%s: %v must be a [min, max] range inside bounds %v", name, r, b.Bounds)
		}
	}
	return nil
}

// Generation holds the generation defaults a request inherits.
type Generation struct {
	MaxNewTokens int     `toml:"max_new_tokens" json:"max_new_tokens"`
	Temperature  float64 `toml:"temperature" json:"temperature"`
	TopK         int     `toml:"top_k" json:"top_k"`
	TopP         float64 `toml:"top_p" json:"top_p"`
	StopIDs      []int32 `toml:"stop_ids" json:"stop_ids"`
	// Grounding, when set, says how the model's answers name boxes and points: the runtime reads
	// them out of each answer's tokens (the response's iris.boxes).
	Grounding *Grounding `toml:"grounding,omitempty" json:"grounding,omitempty"`
}

// Grounding is how a grounding model spells boxes and points with coordinate tokens (LocateAnything:
// <ref>label</ref><box><x1><y1><x2><y2></box>, <0>..<1000> the thousandths of the image's width
// and height). The ids come from the checkpoint's config.json.
type Grounding struct {
	// CoordFirst and CoordLast are the coordinate tokens' ids: id - CoordFirst is the value.
	CoordFirst int32 `toml:"coord_first" json:"coord_first"`
	CoordLast  int32 `toml:"coord_last" json:"coord_last"`
	// Scale is the value of a whole side (1000: a value over Scale is a fraction of the side).
	Scale float64 `toml:"scale" json:"scale"`
	// BoxOpen and BoxClose enclose one box's or point's coordinates; RefOpen and RefClose the
	// label of the boxes that follow.
	BoxOpen  int32 `toml:"box_open" json:"box_open"`
	BoxClose int32 `toml:"box_close" json:"box_close"`
	RefOpen  int32 `toml:"ref_open" json:"ref_open"`
	RefClose int32 `toml:"ref_close" json:"ref_close"`
}

// Validate checks that the ids are distinct, non-negative and outside the coordinate range, and
// that the scale is positive.
func (g *Grounding) Validate() error {
	if g.CoordFirst < 0 || g.CoordLast < g.CoordFirst || !(g.Scale > 0) || math.IsInf(g.Scale, 0) {
		return invalid("generation.grounding: coordinate ids [%d, %d] and scale %v: want 0 <= first <= last and a positive scale",
			g.CoordFirst, g.CoordLast, g.Scale)
	}
	marks := []int32{g.BoxOpen, g.BoxClose, g.RefOpen, g.RefClose}
	for i, id := range marks {
		if id < 0 || (id >= g.CoordFirst && id <= g.CoordLast) || slices.Contains(marks[:i], id) {
			return invalid("generation.grounding: box and ref ids %v must be distinct, non-negative and not coordinate tokens", marks)
		}
	}
	return nil
}

// Plugin names the family plugin module and its limits.
type Plugin struct {
	File   string `toml:"file" json:"file"`
	SHA256 string `toml:"sha256" json:"sha256"`
	// ABI is the plugin ABI version the module speaks.
	ABI            int `toml:"abi" json:"abi"`
	MaxMemoryPages int `toml:"max_memory_pages" json:"max_memory_pages"`
	TimeoutMS      int `toml:"timeout_ms" json:"timeout_ms"`
	// Params are handed to the plugin verbatim (e.g. min_pixels, max_pixels).
	Params map[string]any `toml:"params" json:"params"`
}

// Tokenizer lists the tokenizer files.
type Tokenizer struct {
	Files []File `toml:"files" json:"files"`
}

// File is one file of the bundle, relative to the bundle directory.
type File struct {
	Path   string `toml:"path" json:"path"`
	SHA256 string `toml:"sha256" json:"sha256"`
	Size   int64  `toml:"size" json:"size"`
}

// DecodeManifest parses bundle.toml strictly: an unknown key is an error naming it.
func DecodeManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	md, err := toml.NewDecoder(r).Decode(&m)
	if err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "plugin" && k[1] == "params" {
			continue // free-form, handed to the plugin
		}
		unknown = append(unknown, fmt.Sprintf("%q", k.String()))
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("decode manifest: unknown key %s", strings.Join(unknown, ", "))
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Encode writes the manifest as TOML.
func (m *Manifest) Encode(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("# Iris bundle manifest. Every file is listed with its sha256; loading verifies them.\n")
	if err := toml.NewEncoder(&buf).Encode(m); err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid manifest")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks the manifest's own consistency (not the files on disk).
func (m *Manifest) Validate() error {
	switch {
	case m.Schema != SchemaVersion:
		return invalid("schema: got %d, this build reads %d", m.Schema, SchemaVersion)
	case m.Name == "" || strings.ContainsAny(m.Name, " \t\n/\\") || len(m.Name) > 128:
		return invalid("name: must be 1-128 characters without spaces or slashes")
	case m.Family == "":
		return invalid("family: required")
	case len(m.Tasks) == 0:
		return invalid("tasks: at least one task must be declared")
	}
	seen := map[Task]bool{}
	for _, t := range m.Tasks {
		if t != TaskVisionLanguage && t != TaskText {
			return invalid("tasks: unknown task %q", t)
		}
		if seen[t] {
			return invalid("tasks: %q declared twice", t)
		}
		seen[t] = true
	}
	switch m.Engine.Backend {
	case "cpu", "cuda":
	default:
		return invalid("engine.backend: %q is not cpu or cuda", m.Engine.Backend)
	}
	switch m.Engine.Precision {
	case "fp32", "bf16":
	default:
		return invalid("engine.precision: %q is not fp32 or bf16", m.Engine.Precision)
	}
	if m.Engine.ContextLength < 16 || m.Engine.ContextLength > 1<<20 {
		return invalid("engine.context_length: %d is outside [16, 1048576]", m.Engine.ContextLength)
	}
	if m.Image.MaxBytes <= 0 || m.Image.MaxPixels <= 0 || m.Image.MinSide < 1 || !(m.Image.MaxAspect >= 1) {
		return invalid("image: max_bytes, max_pixels, min_side must be positive and max_aspect >= 1")
	}
	switch m.Image.Read {
	case "", ReadLoadImage, ReadPILWhite:
	default:
		return invalid("image.read: %q is not %q or %q", m.Image.Read, ReadLoadImage, ReadPILWhite)
	}
	if b := m.Image.Budgets; b != nil {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	g := m.Generation
	if g.MaxNewTokens < 1 || g.MaxNewTokens >= m.Engine.ContextLength {
		return invalid("generation.max_new_tokens: %d must be in [1, context_length)", g.MaxNewTokens)
	}
	if !(g.Temperature >= 0) || g.TopK < 0 || !(g.TopP > 0 && g.TopP <= 1) {
		return invalid("generation: temperature >= 0, top_k >= 0 and 0 < top_p <= 1 required")
	}
	if len(g.StopIDs) == 0 {
		return invalid("generation.stop_ids: at least one stop id is required")
	}
	if gr := g.Grounding; gr != nil {
		if err := gr.Validate(); err != nil {
			return err
		}
	}
	if seen[TaskVisionLanguage] {
		if m.Plugin.File == "" {
			return invalid("plugin.file: a vision-language bundle needs a family plugin")
		}
		if m.Plugin.ABI < 1 {
			return invalid("plugin.abi: required")
		}
		if m.Plugin.MaxMemoryPages < 1 || m.Plugin.MaxMemoryPages > 65536 {
			return invalid("plugin.max_memory_pages: %d is outside [1, 65536]", m.Plugin.MaxMemoryPages)
		}
		if m.Plugin.TimeoutMS < 1 || m.Plugin.TimeoutMS > 60000 {
			return invalid("plugin.timeout_ms: %d is outside [1, 60000]", m.Plugin.TimeoutMS)
		}
	}
	if !slices.ContainsFunc(m.Tokenizer.Files, func(f File) bool { return path.Base(f.Path) == "tokenizer.json" }) {
		return invalid("tokenizer.files: tokenizer.json is required")
	}
	if len(m.Weights) == 0 {
		return invalid("weights: at least one weight file is required")
	}
	// (an empty config matches no file: every listed path is checked below to be non-empty)
	if !slices.ContainsFunc(m.Model, func(f File) bool { return f.Path == m.Engine.Config }) {
		return invalid("engine.config: must name a file listed in model")
	}
	paths := map[string]bool{}
	check := func(where string, f File) error {
		if err := checkPath(f.Path); err != nil {
			return invalid("%s: %v", where, err)
		}
		if len(f.SHA256) != 64 || strings.Trim(f.SHA256, "0123456789abcdef") != "" {
			return invalid("%s: %q: sha256 must be 64 lowercase hex digits", where, f.Path)
		}
		if f.Size < 0 {
			return invalid("%s: %q: negative size", where, f.Path)
		}
		if paths[f.Path] {
			return invalid("%s: %q listed twice", where, f.Path)
		}
		paths[f.Path] = true
		return nil
	}
	for _, f := range m.Files() {
		if err := check(f.where, f.File); err != nil {
			return err
		}
	}
	return nil
}

// checkPath accepts only plain relative paths inside the bundle.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if path.IsAbs(p) || strings.Contains(p, "\\") || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || p == ManifestName {
		return fmt.Errorf("path %q must be a clean relative path inside the bundle", p)
	}
	return nil
}

type listed struct {
	where string
	File
}

// Files returns every file the manifest lists, with the section it is listed in.
func (m *Manifest) Files() []listed {
	var out []listed
	if m.Plugin.File != "" {
		out = append(out, listed{"plugin", File{Path: m.Plugin.File, SHA256: m.Plugin.SHA256}})
	}
	for _, f := range m.Tokenizer.Files {
		out = append(out, listed{"tokenizer", f})
	}
	for _, f := range m.Weights {
		out = append(out, listed{"weights", f})
	}
	for _, f := range m.Model {
		out = append(out, listed{"model", f})
	}
	return out
}

// HasTask reports whether the manifest declares t.
func (m *Manifest) HasTask(t Task) bool { return slices.Contains(m.Tasks, t) }

// Primary is the declared primary task.
func (m *Manifest) Primary() Task { return m.Tasks[0] }
