package bundles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Bundle is a loaded, verified bundle directory.
type Bundle struct {
	Dir      string
	Manifest *Manifest
	// Digest is the sha256 of bundle.toml, which lists the digest of every file: it names the
	// bundle's exact contents.
	Digest string
}

// Path returns the absolute path of a file listed in the manifest.
func (b *Bundle) Path(rel string) string { return filepath.Join(b.Dir, filepath.FromSlash(rel)) }

// ErrDigest is wrapped when a file's content differs from the manifest.
var ErrDigest = errors.New("digest mismatch")

// FileError reports a problem with one listed file.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// ReadManifest reads and validates dir/bundle.toml without touching the other files.
func ReadManifest(dir string) (*Manifest, []byte, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	m, err := DecodeManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	return m, raw, nil
}

// Load reads dir/bundle.toml and verifies the digest of every listed file; a changed, missing or
// unreadable file is refused with its name.
func Load(dir string) (*Bundle, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	m, raw, err := ReadManifest(abs)
	if err != nil {
		return nil, err
	}
	for _, f := range m.Files() {
		if err := verifyFile(abs, f.File); err != nil {
			return nil, fmt.Errorf("bundle %s: %s file: %w", m.Name, f.where, err)
		}
	}
	sum := sha256.Sum256(raw)
	return &Bundle{Dir: abs, Manifest: m, Digest: hex.EncodeToString(sum[:])}, nil
}

// FileStatus is the verification result of one file.
type FileStatus struct {
	Path    string `json:"path"`
	Section string `json:"section"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// Verify checks every listed file and reports each one; err is non-nil if any failed.
func Verify(dir string) ([]FileStatus, error) {
	m, _, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	var out []FileStatus
	var first error
	for _, f := range m.Files() {
		st := FileStatus{Path: f.Path, Section: f.where, OK: true}
		if err := verifyFile(dir, f.File); err != nil {
			st.OK, st.Error = false, err.Error()
			if first == nil {
				first = err
			}
		}
		out = append(out, st)
	}
	if first != nil {
		return out, fmt.Errorf("bundle %s: %w", m.Name, first)
	}
	return out, nil
}

func verifyFile(dir string, f File) error {
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	fi, err := os.Lstat(p)
	if err != nil {
		return &FileError{Path: f.Path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &FileError{Path: f.Path, Err: errors.New("not a regular file")}
	}
	if f.Size > 0 && fi.Size() != f.Size {
		return &FileError{Path: f.Path, Err: fmt.Errorf("%w: size %d, manifest says %d", ErrDigest, fi.Size(), f.Size)}
	}
	got, err := hashFile(p)
	if err != nil {
		return &FileError{Path: f.Path, Err: err}
	}
	if got != f.SHA256 {
		return &FileError{Path: f.Path, Err: fmt.Errorf("%w: sha256 %s, manifest says %s", ErrDigest, got, f.SHA256)}
	}
	return nil
}

// hashFile returns the sha256 of a file.
func hashFile(p string) (string, error) {
	fd, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer fd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fd); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DigestOf returns the bundle digest of a manifest's bytes.
func DigestOf(manifest []byte) string {
	sum := sha256.Sum256(manifest)
	return hex.EncodeToString(sum[:])
}
