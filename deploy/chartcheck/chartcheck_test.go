package chartcheck

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden EPP configuration from the chart")

const (
	chartDir = "../chart/iris"
	// The rendered EPP configuration of the default values: the iris-epp package loads it with
	// the EPP's own loader, and `just test-cluster` runs the EPP on it.
	goldenEPPConfig = "../chart/testdata/epp-config.golden.yaml"
)

func schemaDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", ".build", "deploy", "schemas")
	if _, err := os.Stat(filepath.Join(dir, ".v1")); err != nil {
		t.Fatalf("no schemas under %s: run deploy/scripts/schemas.sh (`just deploy-test` does)", dir)
	}
	return dir
}

// podSpec digs a Deployment's pod template out of a rendered object.
type deployment struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Args           []string `json:"args"`
					ReadinessProbe struct {
						HTTPGet struct{ Path string } `json:"httpGet"`
					} `json:"readinessProbe"`
					LivenessProbe struct {
						HTTPGet struct{ Path string } `json:"httpGet"`
					} `json:"livenessProbe"`
					Lifecycle struct {
						PreStop struct {
							Sleep struct{ Seconds int } `json:"sleep"`
						} `json:"preStop"`
					} `json:"lifecycle"`
					Resources struct {
						Limits map[string]string `json:"limits"`
					} `json:"resources"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func TestChart(t *testing.T) {
	v, err := NewValidator(schemaDir(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		values string
		kinds  []string // every rendered object's kind, sorted
		check  func(t *testing.T, objs map[string]Object)
	}{
		{
			name:  "defaults",
			kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Deployment", "InferencePool", "Role", "RoleBinding", "Service", "Service", "ServiceAccount"},
			check: func(t *testing.T, objs map[string]Object) {
				var d deployment
				if err := yaml.Unmarshal(objs["Deployment/iris"].YAML, &d); err != nil {
					t.Fatal(err)
				}
				pod := d.Spec.Template
				if got := pod.Metadata.Labels["inference.networking.k8s.io/engine-type"]; got != "iris" {
					t.Errorf("engine-type label %q, want iris", got)
				}
				c := pod.Spec.Containers[0]
				if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("probes on %q and %q, want /readyz and /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
				}
				if c.Resources.Limits["nvidia.com/gpu"] != "1" {
					t.Errorf("limits %v, want one nvidia.com/gpu", c.Resources.Limits)
				}
				if c.Lifecycle.PreStop.Sleep.Seconds != 10 || pod.Spec.TerminationGracePeriodSeconds != 45 {
					t.Errorf("preStop sleep %d s, grace %d s; want 10 and 10+30+5", c.Lifecycle.PreStop.Sleep.Seconds, pod.Spec.TerminationGracePeriodSeconds)
				}
				if !slices.Contains(c.Args, "--bundle=/bundles/qwen25vl-3b") || !slices.Contains(c.Args, "--addr=0.0.0.0:8080") {
					t.Errorf("args %v lack the bundle or the address", c.Args)
				}
			},
		},
		{
			name: "route, model, two pickers, no affinity, CPU",
			values: `
httpRoute: {enabled: true}
epp: {replicas: 2, model: demo, imageAffinity: {enabled: false}}
iris:
  resources: {limits: {nvidia.com/gpu: null, cpu: "8", memory: 8Gi}}
  bundleVolume: {source: {hostPath: {path: /srv/bundles, type: Directory}}}
`,
			kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Deployment", "HTTPRoute", "InferencePool", "Role", "RoleBinding", "Service", "Service", "ServiceAccount"},
			check: func(t *testing.T, objs map[string]Object) {
				cfg, err := ConfigData(objs["ConfigMap/iris-epp"], "config.yaml")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(cfg, `queuedRequestsSpec: "iris_requests_queued{model=\"demo\"}"`) {
					t.Errorf("the EPP config does not select model demo's gauge:\n%s", cfg)
				}
				if strings.Contains(cfg, "iris-image-affinity-scorer") {
					t.Errorf("affinity disabled, yet the EPP config names its scorer:\n%s", cfg)
				}
				var d deployment
				if err := yaml.Unmarshal(objs["Deployment/iris"].YAML, &d); err != nil {
					t.Fatal(err)
				}
				if l := d.Spec.Template.Spec.Containers[0].Resources.Limits; len(l) != 2 || l["cpu"] != "8" {
					t.Errorf("CPU pod's limits %v, want cpu and memory only", l)
				}
				if !strings.Contains(string(objs["Deployment/iris-epp"].YAML), "--ha-enable-leader-election") ||
					!strings.Contains(string(objs["Role/iris-epp"].YAML), "leases") {
					t.Error("two pickers without leader election or its leases")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			msgs, err := Lint(chartDir, "default", values)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				t.Errorf("lint: %s", m.Error())
			}
			rendered, err := Render(chartDir, "iris", "default", values)
			if err != nil {
				t.Fatal(err)
			}
			objs := map[string]Object{}
			var kinds []string
			for _, o := range rendered {
				if err := v.Validate(o); err != nil {
					t.Error(err)
				}
				kinds = append(kinds, o.Kind)
				objs[o.Kind+"/"+o.Name] = o
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.kinds) {
				t.Fatalf("rendered %v, want %v", kinds, tc.kinds)
			}
			tc.check(t, objs)
		})
	}
}

// A config whose shutdown timeout is not the one the grace period is sized for is refused.
// (Helm's linter renders `fail` as information, so only the render is asked.)
func TestShutdownTimeoutMismatch(t *testing.T) {
	values := map[string]any{"iris": map[string]any{"shutdownTimeoutSeconds": 60}}
	_, err := Render(chartDir, "iris", "default", values)
	if err == nil || !strings.Contains(err.Error(), `shutdown_timeout = "60s"`) {
		t.Fatalf("Render: %v, want the shutdown_timeout mismatch refused", err)
	}
}

// The linter is not a check that cannot fail: a pool name Kubernetes refuses is reported.
func TestLintRefuses(t *testing.T) {
	msgs, err := Lint(chartDir, "default", map[string]any{"inferencePool": map[string]any{"name": "Bad_Name"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(msgs, func(m support.Message) bool {
		return strings.Contains(m.Error(), `"Bad_Name": metadata.name: Invalid value`)
	}) {
		t.Fatalf("lint messages %v, want the invalid name among them", msgs)
	}
}

// The validator is not a check that cannot fail: a field the schema lacks, a wrong type and a
// kind without a schema are refused.
func TestValidatorRefuses(t *testing.T) {
	v, err := NewValidator(schemaDir(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, yaml, want string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {port: 80}\n", "additional properties 'port' not allowed"},
		{"wrong type", "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: p}\nspec:\n  selector: {matchLabels: {a: b}}\n  targetPorts: [{number: eighty}]\n  endpointPickerRef: {name: e, port: {number: 9002}}\n", "number"},
		{"no schema", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", "could not find schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Validate(Object{Template: tc.name, YAML: []byte(tc.yaml), Kind: "x", Name: "x"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The golden EPP configuration is the chart's, rendered with the default values.
func TestGoldenEPPConfig(t *testing.T) {
	objs, err := Render(chartDir, "iris", "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(objs, func(o Object) bool { return o.Kind == "ConfigMap" && o.Name == "iris-epp" })
	if i < 0 {
		t.Fatal("no ConfigMap iris-epp rendered")
	}
	cfg, err := ConfigData(objs[i], "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenEPPConfig, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenEPPConfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != string(want) {
		t.Fatalf("the chart's EPP config differs from %s (go test -run TestGoldenEPPConfig -update rewrites it):\n%s", goldenEPPConfig, cfg)
	}
}
