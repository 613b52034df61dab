// Package chartcheck lints and renders the Iris Helm chart with Helm's own packages and validates
// every rendered object with kubeconform's validator against the Kubernetes core schemas and the
// InferencePool and Gateway API CRD schemas (deploy/scripts/schemas.sh writes them). Helm is
// v3.20.2, the newest release on the Kubernetes 0.35 libraries the EPP v1.5.0 is built with: one
// module graph compiles those libraries once for this package and the affinity plugin.
package chartcheck

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
	"helm.sh/helm/v3/pkg/chartutil"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

// Lint runs `helm lint`'s rules on the chart with the given values and returns its messages
// at warning level and above.
func Lint(chartDir, namespace string, values map[string]any) ([]support.Message, error) {
	vals, err := clone(values)
	if err != nil {
		return nil, err
	}
	var out []support.Message
	for _, m := range lint.All(chartDir, vals, namespace, false).Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m)
		}
	}
	return out, nil
}

// clone deep-copies values: Helm's coalescing deletes the keys set to null from the map it is given.
func clone(values map[string]any) (map[string]any, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return out, nil
}

// Object is one rendered manifest.
type Object struct {
	Template string // the template it came from
	YAML     []byte
	Kind     string
	Name     string
}

// Render renders the chart as `helm template` does for a release of the given name and
// namespace, and returns its objects in template order.
func Render(chartDir, release, namespace string, values map[string]any) ([]Object, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", chartDir, err)
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := clone(values)
	if err != nil {
		return nil, err
	}
	vals, err = chartutil.ToRenderValues(chrt, vals, opts, chartutil.DefaultCapabilities.Copy())
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var objs []Object
	for _, name := range names {
		for doc := range strings.SplitSeq(files[name], "\n---") {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if meta.Kind == "" {
				continue // a template that rendered nothing, or only comments
			}
			objs = append(objs, Object{Template: filepath.Base(name), YAML: []byte(doc), Kind: meta.Kind, Name: meta.Metadata.Name})
		}
	}
	return objs, nil
}

// Validator validates objects against the schemas under a directory laid out by
// deploy/scripts/schemas.sh, strictly (an unknown field is an error); a kind without a schema
// is an error too.
type Validator struct{ v validator.Validator }

// NewValidator returns a validator reading schemas from dir only (nothing is fetched).
func NewValidator(dir string) (*Validator, error) {
	v, err := validator.New([]string{
		filepath.Join(dir, "core", "{{ .ResourceKind }}{{ .KindSuffix }}.json"),
		filepath.Join(dir, "crds", "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"),
	}, validator.Opts{Strict: true})
	if err != nil {
		return nil, fmt.Errorf("kubeconform: %w", err)
	}
	return &Validator{v: v}, nil
}

// Validate returns nil when the object matches its schema, or what is wrong with it.
func (v *Validator) Validate(o Object) error {
	r := v.v.ValidateResource(resource.Resource{Path: o.Template, Bytes: o.YAML})
	switch r.Status {
	case validator.Valid:
		return nil
	case validator.Invalid:
		return fmt.Errorf("%s %s (%s) is invalid: %w", o.Kind, o.Name, o.Template, r.Err)
	case validator.Empty:
		return fmt.Errorf("%s (%s) is empty", o.Name, o.Template)
	default:
		err := r.Err
		if err == nil {
			err = fmt.Errorf("kubeconform status %d", r.Status)
		}
		return fmt.Errorf("%s %s (%s): %w", o.Kind, o.Name, o.Template, err)
	}
}

// ConfigData returns one key of a rendered ConfigMap's data.
func ConfigData(o Object, key string) (string, error) {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(o.YAML, &cm); err != nil {
		return "", fmt.Errorf("%s: %w", o.Name, err)
	}
	d, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("%s has no data key %q", o.Name, key)
	}
	return d, nil
}
