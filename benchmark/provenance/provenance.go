// Package provenance fingerprints everything a profiling run depends on (bundle files, input
// files, tokenizer files and the source tree: git HEAD, git status and the content of every
// tracked and untracked, non-ignored file) so that a run can prove nothing changed under it.
package provenance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Tokenizer is a tokenizer override: a local directory (fingerprinted file by file) or a hub id
// pinned to an immutable commit.
type Tokenizer struct {
	Dir      string `json:"dir,omitempty"`
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
}

var (
	hubIDRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)
	revisionRe = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// ErrTokenizer is wrapped by every refused tokenizer override.
var ErrTokenizer = errors.New("tokenizer override refused")

// ParseTokenizer validates a tokenizer override. A local directory is taken as is and may not
// carry a revision; anything else must be a hub id ("org/name", optionally "org/name@rev") with a
// 40-hex commit revision, so that the files cannot change behind the run. A revision without a
// tokenizer, a branch or tag name, a missing path or a file are refused. Both empty means no
// override (nil).
func ParseTokenizer(arg, revision string) (*Tokenizer, error) {
	if arg == "" {
		if revision != "" {
			return nil, fmt.Errorf("%w: revision %q given without a tokenizer", ErrTokenizer, revision)
		}
		return nil, nil
	}
	looksLocal := strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "~")
	if fi, err := os.Stat(arg); err == nil || looksLocal {
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: %s: %w", ErrTokenizer, arg, err)
		case !fi.IsDir():
			return nil, fmt.Errorf("%w: %s is a file; give the directory holding tokenizer.json", ErrTokenizer, arg)
		case revision != "":
			return nil, fmt.Errorf("%w: a local directory (%s) takes no revision", ErrTokenizer, arg)
		}
		abs, err := filepath.Abs(arg)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTokenizer, err)
		}
		return &Tokenizer{Dir: abs}, nil
	}
	id, rev, hasAt := strings.Cut(arg, "@")
	if hasAt {
		if revision != "" && revision != rev {
			return nil, fmt.Errorf("%w: %s names revision %q but the revision flag says %q", ErrTokenizer, arg, rev, revision)
		}
		revision = rev
	}
	if !hubIDRe.MatchString(id) {
		return nil, fmt.Errorf("%w: %q is neither an existing directory nor a hub id", ErrTokenizer, arg)
	}
	if !revisionRe.MatchString(revision) {
		return nil, fmt.Errorf("%w: hub tokenizer %s must name an immutable 40-hex commit revision, got %q", ErrTokenizer, id, revision)
	}
	return &Tokenizer{HubID: id, Revision: revision}, nil
}

// Spec says what to fingerprint.
type Spec struct {
	// Bundles are bundle directories, fingerprinted file by file (every file, listed or not).
	Bundles []string
	// Inputs are input files.
	Inputs    []string
	Tokenizer *Tokenizer
	// Source is a directory inside a git work tree; empty skips the source tree.
	Source string
	// Exclude lists paths (files or directories) left out of the source tree, such as the run's
	// own output directory.
	Exclude []string
}

// Snapshot is the fingerprint of a Spec at one moment.
type Snapshot struct {
	Taken time.Time `json:"taken"`
	// Files maps "<group>:<path>" to the file's sha256 ("symlink:<target>" for a link, "missing"
	// for a tracked file that is gone).
	Files map[string]string `json:"files"`
	// GitRoot, GitHead and GitStatus describe the source tree ("" when not fingerprinted;
	// GitHead is "unborn" before the first commit).
	GitRoot   string     `json:"git_root,omitempty"`
	GitHead   string     `json:"git_head,omitempty"`
	GitStatus string     `json:"git_status,omitempty"`
	Tokenizer *Tokenizer `json:"tokenizer,omitempty"`
}

// Take fingerprints spec.
func Take(ctx context.Context, spec Spec) (*Snapshot, error) {
	s := &Snapshot{Taken: time.Now().UTC(), Files: map[string]string{}, Tokenizer: spec.Tokenizer}
	for _, dir := range spec.Bundles {
		if err := s.addTree(ctx, "bundle", dir); err != nil {
			return nil, err
		}
	}
	for _, f := range spec.Inputs {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("fingerprint input %s: %w", f, err)
		}
		sum, err := fileDigest(abs)
		if err != nil {
			return nil, fmt.Errorf("fingerprint input: %w", err)
		}
		s.Files["input:"+abs] = sum
	}
	if t := spec.Tokenizer; t != nil && t.Dir != "" {
		if err := s.addTree(ctx, "tokenizer", t.Dir); err != nil {
			return nil, err
		}
	}
	if spec.Source != "" {
		if err := s.addSource(ctx, spec.Source, spec.Exclude); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Snapshot) addTree(ctx context.Context, group, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("fingerprint %s %s: %w", group, dir, err)
	}
	n := 0
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		sum, err := fileDigest(p)
		if err != nil {
			return err
		}
		s.Files[group+":"+p] = sum
		n++
		return nil
	})
	if err != nil {
		return fmt.Errorf("fingerprint %s %s: %w", group, dir, err)
	}
	if n == 0 {
		return fmt.Errorf("fingerprint %s %s: no files", group, dir)
	}
	return nil
}

// addSource records git HEAD, git status and every tracked or untracked, non-ignored file.
func (s *Snapshot) addSource(ctx context.Context, dir string, exclude []string) error {
	root, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("fingerprint source: %s is not in a git work tree: %w", dir, err)
	}
	s.GitRoot = strings.TrimSpace(string(root))
	head, err := git(ctx, s.GitRoot, "rev-parse", "--verify", "-q", "HEAD")
	if err != nil {
		s.GitHead = "unborn"
	} else {
		s.GitHead = strings.TrimSpace(string(head))
	}
	var ex []string
	for _, e := range exclude {
		abs, err := filepath.Abs(e)
		if err != nil {
			return fmt.Errorf("fingerprint source: %w", err)
		}
		if rel, err := filepath.Rel(s.GitRoot, abs); err == nil && !strings.HasPrefix(rel, "..") {
			ex = append(ex, filepath.ToSlash(rel))
		}
	}
	excluded := func(rel string) bool {
		return slices.ContainsFunc(ex, func(e string) bool { return rel == e || strings.HasPrefix(rel, e+"/") })
	}
	status, err := git(ctx, s.GitRoot, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		return fmt.Errorf("fingerprint source: git status: %w", err)
	}
	var kept []string
	for entry := range strings.SplitSeq(string(status), "\x00") {
		if len(entry) > 3 && !excluded(entry[3:]) {
			kept = append(kept, entry)
		}
	}
	s.GitStatus = strings.Join(kept, "\n")
	list, err := git(ctx, s.GitRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return fmt.Errorf("fingerprint source: git ls-files: %w", err)
	}
	for rel := range strings.SplitSeq(string(list), "\x00") {
		if rel == "" || excluded(rel) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(s.GitRoot, filepath.FromSlash(rel))
		sum, err := fileDigest(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			sum = "missing"
		case err != nil:
			return fmt.Errorf("fingerprint source: %w", err)
		}
		s.Files["source:"+rel] = sum
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// fileDigest hashes a regular file; a symbolic link is recorded by its target, a directory (a
// submodule) by a marker.
func fileDigest(p string) (string, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		return "symlink:" + t, nil
	case fi.IsDir():
		return "directory", nil
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Change is one difference between two snapshots.
type Change struct {
	What   string `json:"what"`
	Before string `json:"before"`
	After  string `json:"after"`
}

func (c Change) String() string {
	if strings.Contains(c.Before, "\n") || strings.Contains(c.After, "\n") {
		b, a := firstDiff(c.Before, c.After)
		return fmt.Sprintf("%s: %s -> %s", c.What, short(b), short(a))
	}
	return fmt.Sprintf("%s: %s -> %s", c.What, short(c.Before), short(c.After))
}

// firstDiff returns the first line that differs between two multi-line values.
func firstDiff(before, after string) (string, string) {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	for i := range max(len(b), len(a)) {
		var x, y string
		if i < len(b) {
			x = b[i]
		}
		if i < len(a) {
			y = a[i]
		}
		if x != y {
			return x, y
		}
	}
	return "", ""
}

func short(s string) string {
	switch {
	case s == "":
		return "(none)"
	case len(s) == 64 && !strings.ContainsAny(s, ":/ \n"):
		return s[:12] // a sha256
	case len(s) > 64:
		return s[:61] + "..."
	}
	return s
}

// Diff lists every difference between two snapshots, in a stable order.
func Diff(before, after *Snapshot) []Change {
	var out []Change
	if before.GitHead != after.GitHead {
		out = append(out, Change{"git HEAD", before.GitHead, after.GitHead})
	}
	if before.GitStatus != after.GitStatus {
		out = append(out, Change{"git status", before.GitStatus, after.GitStatus})
	}
	keys := map[string]bool{}
	for k := range before.Files {
		keys[k] = true
	}
	for k := range after.Files {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		if b, a := before.Files[k], after.Files[k]; a != b {
			out = append(out, Change{k, b, a})
		}
	}
	return out
}
