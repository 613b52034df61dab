// Package bundle implements the `iris bundle` subcommands: build, verify and inspect.
package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iris-vlm/iris/bundles"
)

const usage = `usage: iris bundle <command> [flags]

commands:
  build    --from <hf-checkpoint-dir> --family <family> --out <dir> [--plugin <file.wasm>] [--param k=v ...]
  verify   <dir>     check the digest of every file
  inspect  <dir>     print the manifest and digest as JSON
`

// Run executes `iris bundle ...` with args (after "bundle").
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("bundle: missing command")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(args[1:], stdout)
	case "inspect":
		return inspect(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("bundle: unknown command %q", args[0])
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("iris bundle build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bundles.BuildOptions
	var tasks string
	var params paramFlag
	fs.StringVar(&o.From, "from", "", "Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json, preprocessor_config.json)")
	fs.StringVar(&o.Family, "family", "", "model family: "+strings.Join(familyNames(), ", "))
	fs.StringVar(&o.Out, "out", "", "bundle directory to create (must not exist or be empty)")
	fs.StringVar(&o.Plugin, "plugin", "", "family plugin .wasm (default: <family>.wasm from $IRIS_PLUGIN_DIR, ./bin/plugins, or plugins/ beside the iris binary)")
	fs.StringVar(&o.Name, "name", "", "model name clients send (default: base name of --out)")
	fs.StringVar(&o.Backend, "backend", "", "engine backend: cpu or cuda (default cpu)")
	fs.StringVar(&o.Precision, "precision", "", "compute precision: fp32 or bf16 (default fp32 on cpu, bf16 on cuda)")
	fs.IntVar(&o.ContextLength, "context", 0, "context length in tokens (default 4096, capped by the model)")
	fs.IntVar(&o.MaxNewTokens, "max-new-tokens", 0, "default generation limit (default: the checkpoint's generation_config, else 256)")
	fs.StringVar(&tasks, "tasks", "", "comma-separated declared tasks, primary first (default: the family's)")
	fs.Var(&params, "param", "plugin parameter key=value over preprocessor_config.json's (repeatable; e.g. max_patches=1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.From == "" || o.Family == "" || o.Out == "" {
		fs.Usage()
		return errors.New("bundle build: --from, --family and --out are required")
	}
	o.Params = params.m
	for _, t := range strings.Split(tasks, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Tasks = append(o.Tasks, bundles.Task(t))
		}
	}
	if o.Plugin == "" {
		p, err := findPlugin(o.Family)
		if err != nil {
			return err
		}
		o.Plugin = p
	}
	o.Progress = stderr
	fmt.Fprintf(stderr, "building bundle %s from %s (family %s, plugin %s)\n", o.Out, o.From, o.Family, o.Plugin)
	b, err := bundles.Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bundle %s built in %s (digest %s)\n", b.Manifest.Name, b.Dir, b.Digest)
	return nil
}

// paramFlag collects --param key=value; a value that parses as an integer, a float or a bool is
// one, else a string.
type paramFlag struct{ m map[string]any }

func (p *paramFlag) String() string { return fmt.Sprint(p.m) }

func (p *paramFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	if p.m == nil {
		p.m = map[string]any{}
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		p.m[k] = i
	} else if f, err := strconv.ParseFloat(v, 64); err == nil {
		p.m[k] = f
	} else if b, err := strconv.ParseBool(v); err == nil {
		p.m[k] = b
	} else {
		p.m[k] = v
	}
	return nil
}

// findPlugin looks for <family>.wasm where `just plugins` and releases put it.
func findPlugin(family string) (string, error) {
	var dirs []string
	if d := os.Getenv("IRIS_PLUGIN_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, filepath.Join("bin", "plugins"))
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "plugins"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, family+".wasm")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("bundle build: no %s.wasm in %s; build it with `just plugins` or pass --plugin", family, strings.Join(dirs, ", "))
}

func familyNames() []string {
	var out []string
	for n := range bundles.Families {
		out = append(out, n)
	}
	return out
}

func verify(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: iris bundle verify <dir>")
	}
	st, err := bundles.Verify(args[0])
	for _, s := range st {
		mark := "ok  "
		if !s.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(stdout, "%s %-9s %s", mark, s.Section, s.Path)
		if s.Error != "" {
			fmt.Fprintf(stdout, ": %s", s.Error)
		}
		fmt.Fprintln(stdout)
	}
	return err
}

func inspect(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: iris bundle inspect <dir>")
	}
	m, raw, err := bundles.ReadManifest(args[0])
	if err != nil {
		return err
	}
	var total int64
	for _, f := range m.Files() {
		total += f.Size
	}
	out := struct {
		Dir      string            `json:"dir"`
		Digest   string            `json:"digest"`
		Bytes    int64             `json:"bytes"`
		Manifest *bundles.Manifest `json:"manifest"`
	}{args[0], bundles.DigestOf(raw), total, m}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
