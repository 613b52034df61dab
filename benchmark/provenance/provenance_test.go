package provenance

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const rev = "0123456789abcdef0123456789abcdef01234567"

func TestParseTokenizer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, arg, rev string
		want           *Tokenizer
		wantErr        string
	}{
		{name: "none"},
		{name: "local dir", arg: dir, want: &Tokenizer{Dir: dir}},
		{name: "hub id pinned", arg: "Qwen/Qwen2.5-VL-3B-Instruct", rev: rev, want: &Tokenizer{HubID: "Qwen/Qwen2.5-VL-3B-Instruct", Revision: rev}},
		{name: "hub id at rev", arg: "Qwen/Qwen2.5-VL-3B-Instruct@" + rev, want: &Tokenizer{HubID: "Qwen/Qwen2.5-VL-3B-Instruct", Revision: rev}},
		{name: "same rev twice", arg: "org/tok@" + rev, rev: rev, want: &Tokenizer{HubID: "org/tok", Revision: rev}},
		{name: "revision alone", rev: rev, wantErr: "without a tokenizer"},
		{name: "hub id unpinned", arg: "Qwen/Qwen2.5-VL-3B-Instruct", wantErr: "40-hex"},
		{name: "hub id on a branch", arg: "Qwen/Qwen2.5-VL-3B-Instruct", rev: "main", wantErr: "40-hex"},
		{name: "hub id at a tag", arg: "org/tok@v1.0", wantErr: "40-hex"},
		{name: "short sha", arg: "org/tok", rev: rev[:12], wantErr: "40-hex"},
		{name: "uppercase sha", arg: "org/tok", rev: strings.ToUpper(rev), wantErr: "40-hex"},
		{name: "two revisions", arg: "org/tok@" + rev, rev: strings.Repeat("f", 40), wantErr: "revision flag"},
		{name: "local dir with revision", arg: dir, rev: rev, wantErr: "takes no revision"},
		{name: "file", arg: file, wantErr: "is a file"},
		{name: "missing path", arg: "./no/such/dir", wantErr: "no such file"},
		{name: "not an id", arg: "two words", rev: rev, wantErr: "neither"},
		{name: "too deep", arg: "a/b/c", rev: rev, wantErr: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokenizer(tt.arg, tt.rev)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrTokenizer) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a git work tree with a committed file, a dirty tracked file, an untracked file, an
// ignored file and an output directory, plus a bundle, an input and a tokenizer outside it.
type fixture struct{ repo, bundle, input, tok, out string }

func newFixture(t *testing.T, commit bool) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{repo: filepath.Join(base, "repo"), bundle: filepath.Join(base, "bundle"), input: filepath.Join(base, "in.jsonl"),
		tok: filepath.Join(base, "tok")}
	f.out = filepath.Join(f.repo, "out")
	write(t, filepath.Join(f.repo, "main.go"), "package main\n")
	write(t, filepath.Join(f.repo, "dirty.go"), "package main // v1\n")
	write(t, filepath.Join(f.repo, ".gitignore"), "ignored.bin\n")
	run(t, f.repo, "git", "init", "-q")
	if commit {
		run(t, f.repo, "git", "add", ".")
		run(t, f.repo, "git", "commit", "-q", "-m", "init")
	}
	write(t, filepath.Join(f.repo, "dirty.go"), "package main // v2, dirty before the run\n")
	write(t, filepath.Join(f.repo, "new.go"), "package main // untracked\n")
	write(t, filepath.Join(f.repo, "ignored.bin"), "x")
	write(t, filepath.Join(f.out, "records.jsonl"), "{}\n")
	write(t, filepath.Join(f.bundle, "bundle.toml"), "name = 'demo'\n")
	write(t, filepath.Join(f.bundle, "model", "weights.safetensors"), "WEIGHTS")
	write(t, f.input, `{"text":"q"}`+"\n")
	write(t, filepath.Join(f.tok, "tokenizer.json"), "{}")
	return f
}

func (f fixture) spec() Spec {
	return Spec{Bundles: []string{f.bundle}, Inputs: []string{f.input}, Tokenizer: &Tokenizer{Dir: f.tok}, Source: f.repo, Exclude: []string{f.out}}
}

func TestSnapshotCoversEverything(t *testing.T) {
	f := newFixture(t, true)
	s, err := Take(t.Context(), f.spec())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"source:main.go", "source:dirty.go", "source:new.go", "source:.gitignore",
		"bundle:" + filepath.Join(f.bundle, "model", "weights.safetensors"), "input:" + f.input, "tokenizer:" + filepath.Join(f.tok, "tokenizer.json")} {
		if _, ok := s.Files[key]; !ok {
			t.Errorf("snapshot lacks %s", key)
		}
	}
	for _, key := range []string{"source:ignored.bin", "source:out/records.jsonl"} {
		if _, ok := s.Files[key]; ok {
			t.Errorf("snapshot has %s", key)
		}
	}
	if len(s.GitHead) != 40 || !strings.Contains(s.GitStatus, "dirty.go") || !strings.Contains(s.GitStatus, "new.go") {
		t.Errorf("git head %q, status %q", s.GitHead, s.GitStatus)
	}
}

func TestDiffDetectsChanges(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, f fixture)
		want   string // a substring of the change list; "" for no change
	}{
		{"nothing", func(*testing.T, fixture) {}, ""},
		{"ignored file", func(t *testing.T, f fixture) { write(t, filepath.Join(f.repo, "ignored.bin"), "y") }, ""},
		{"output dir", func(t *testing.T, f fixture) { write(t, filepath.Join(f.out, "more.json"), "{}") }, ""},
		{"already-dirty file edited again", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.repo, "dirty.go"), "package main // v3\n")
		}, "source:dirty.go"},
		{"clean file edited", func(t *testing.T, f fixture) { write(t, filepath.Join(f.repo, "main.go"), "package main\n\n") }, "source:main.go"},
		{"untracked file edited", func(t *testing.T, f fixture) { write(t, filepath.Join(f.repo, "new.go"), "package x\n") }, "source:new.go"},
		{"file added", func(t *testing.T, f fixture) { write(t, filepath.Join(f.repo, "added.go"), "package x\n") }, "source:added.go"},
		{"tracked file deleted", func(t *testing.T, f fixture) { _ = os.Remove(filepath.Join(f.repo, "main.go")) }, "missing"},
		{"commit", func(t *testing.T, f fixture) {
			run(t, f.repo, "git", "commit", "-q", "--allow-empty", "-m", "x")
		}, "git HEAD"},
		{"bundle byte flipped", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.bundle, "model", "weights.safetensors"), "WEIGHTs")
		}, "bundle:"},
		{"bundle file added", func(t *testing.T, f fixture) { write(t, filepath.Join(f.bundle, "extra"), "") }, "bundle:"},
		{"input edited", func(t *testing.T, f fixture) { write(t, f.input, `{"text":"Q"}`+"\n") }, "input:"},
		{"tokenizer edited", func(t *testing.T, f fixture) { write(t, filepath.Join(f.tok, "tokenizer.json"), "{ }") }, "tokenizer:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, true)
			before, err := Take(t.Context(), f.spec())
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(t, f)
			after, err := Take(t.Context(), f.spec())
			if err != nil {
				t.Fatal(err)
			}
			changes := Diff(before, after)
			var list []string
			for _, c := range changes {
				list = append(list, c.String())
			}
			joined := strings.Join(list, "\n")
			if tt.want == "" {
				if len(changes) != 0 {
					t.Errorf("unexpected changes:\n%s", joined)
				}
				return
			}
			if !strings.Contains(joined, tt.want) {
				t.Errorf("changes %q lack %q", joined, tt.want)
			}
		})
	}
}

func TestUnbornHead(t *testing.T) {
	f := newFixture(t, false)
	s, err := Take(t.Context(), f.spec())
	if err != nil {
		t.Fatal(err)
	}
	if s.GitHead != "unborn" || s.Files["source:main.go"] == "" {
		t.Errorf("head %q, files %v", s.GitHead, s.Files)
	}
}

func TestTakeRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := Take(t.Context(), Spec{Source: dir}); err == nil {
		t.Error("a directory outside git was accepted as a source tree")
	}
	if _, err := Take(t.Context(), Spec{Bundles: []string{filepath.Join(dir, "none")}}); err == nil {
		t.Error("a missing bundle was fingerprinted")
	}
	if _, err := Take(t.Context(), Spec{Bundles: []string{dir}}); err == nil {
		t.Error("an empty bundle was fingerprinted")
	}
}

func TestChangeStringShowsFirstDifference(t *testing.T) {
	c := Change{What: "git status", Before: " M a.go\n M b.go", After: " M a.go\n M c.go\n?? d.go"}
	if got := c.String(); got != "git status:  M b.go ->  M c.go" {
		t.Errorf("got %q", got)
	}
	sum := strings.Repeat("ab", 32)
	if got := (Change{What: "input:x", Before: sum, After: ""}).String(); got != "input:x: abababababab -> (none)" {
		t.Errorf("got %q", got)
	}
}
