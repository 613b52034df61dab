// Command iris is the Iris gateway: it serves vision-language bundles behind an OpenAI-compatible
// chat API, builds and checks bundles, and profiles servers.
//
//	iris serve   --bundle <dir> [--bundle <dir>...] [--addr host:port] [--config gateway.toml]
//	iris bundle  build|verify|inspect ...
//	iris ask     --image <file> [--url http://host:port] <question>
//	iris profile --url <server> --input <single_turn.jsonl> [--bundle <dir>] --out <dir> ...
//	iris version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/iris-vlm/iris/benchmark/cmd/profile"
	"github.com/iris-vlm/iris/bundles/cmd/bundle"
)

const usage = `usage: iris <command> [flags]

commands:
  serve     serve bundles over the OpenAI-compatible HTTP API
  bundle    build, verify or inspect a bundle
  ask       ask a server one image question and show the answer, usage and stage timings
  profile   profile an OpenAI-compatible server (AIPerf-compatible artifacts, native parity)
  version   print the version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "iris:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "bundle":
		return bundle.Run(ctx, args[1:], stdout, stderr)
	case "ask":
		return ask(ctx, args[1:], stdout, stderr)
	case "profile":
		return profile.Run(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "iris", version())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}
