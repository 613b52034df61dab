//go:build cluster

// Package cluster runs Iris's deployment shape on one machine (`just test-cluster`): an envtest
// control plane (kube-apiserver and etcd) with the InferencePool CRDs, three `iris serve`
// processes on loopback addresses standing for three pods of an InferencePool, the EPP with
// Iris's image-affinity scorer (the chart's configuration), and Envoy in front, asking the EPP
// over ext_proc and routing on its x-gateway-destination-endpoint header. The test plays the
// kubelet only: it publishes each pod's IP and readiness, as probes would.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gie "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/iris-vlm/iris/deploy/imageaffinity"
)

const (
	namespace = "default"
	model     = "demo"
	question  = "How many shapes are there?"
)

// The pool's endpoints: one loopback address each, all on one port (as pods share a port).
var addrs = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}

type server struct {
	name, ip string
	cmd      *exec.Cmd
	done     chan struct{}
}

func (s *server) url(port int) string { return "http://" + net.JoinHostPort(s.ip, strconv.Itoa(port)) }

// env is everything the phases share.
type env struct {
	t         *testing.T
	root      string
	port      int // every iris's
	envoy     string
	k8s       client.Client
	servers   []*server
	images    []string // data URLs of the held-out scenes, in order
	digests   []string
	reference map[int]string // image index -> a single server's answer
	http      *http.Client
	result    map[string]any
}

func TestCluster(t *testing.T) {
	start := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".build", "deploy", "bin")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	crds := gieDir(t, root)
	tenv := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(crds, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: bin,
	}
	cfg, err := tenv.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = tenv.Stop() })
	t.Logf("control plane up in %s", time.Since(start).Round(time.Millisecond))
	user, err := tenv.AddUser(envtest.User{Name: "iris-epp", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gie.Install(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	e := &env{t: t, root: root, k8s: k8s, port: freePort(t), http: &http.Client{Timeout: 5 * time.Minute}, result: map[string]any{}}
	e.loadImages()
	logs := filepath.Join(root, ".build", "deploy", "cluster-logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, ip := range addrs {
		e.servers = append(e.servers, e.startIris(ctx, fmt.Sprintf("iris-%d", i), ip, logs))
	}
	for _, s := range e.servers {
		e.waitReady(s)
		e.createPod(ctx, s)
	}
	pool := &gie.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: namespace},
		Spec: gie.InferencePoolSpec{
			Selector:          gie.LabelSelector{MatchLabels: map[gie.LabelKey]gie.LabelValue{"app.kubernetes.io/name": "iris"}},
			TargetPorts:       []gie.Port{{Number: gie.PortNumber(e.port)}},
			EndpointPickerRef: gie.EndpointPickerRef{Name: "iris-epp", Port: &gie.Port{Number: 9002}},
		},
	}
	if err := k8s.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}

	eppPort, healthPort, metricsPort := freePort(t), freePort(t), freePort(t)
	epp := exec.CommandContext(ctx, filepath.Join(bin, "iris-epp"),
		"--pool-name=iris", "--pool-namespace="+namespace,
		"--config-file="+filepath.Join(root, "deploy", "chart", "testdata", "epp-config.golden.yaml"),
		"--grpc-port="+strconv.Itoa(eppPort), "--grpc-health-port="+strconv.Itoa(healthPort),
		"--metrics-port="+strconv.Itoa(metricsPort), "--secure-serving=false", "--tracing=false", "--metrics-endpoint-auth=false",
		"--refresh-metrics-interval=50ms")
	epp.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath, "NAMESPACE="+namespace, "POD_NAME=iris-epp-0")
	startLogged(t, epp, filepath.Join(logs, "epp.log"))

	envoyPort, adminPort := freePort(t), freePort(t)
	envoyCfg := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(envoyCfg, []byte(envoyConfig(envoyPort, adminPort, eppPort)), 0o644); err != nil {
		t.Fatal(err)
	}
	envoy := exec.CommandContext(ctx, filepath.Join(bin, "envoy"), "-c", envoyCfg, "--disable-hot-restart", "--log-level", "warn", "--concurrency", "2")
	startLogged(t, envoy, filepath.Join(logs, "envoy.log"))
	e.envoy = "http://127.0.0.1:" + strconv.Itoa(envoyPort)
	e.waitRouted()
	t.Logf("pool routed through Envoy after %s", time.Since(start).Round(time.Millisecond))

	e.parity()
	e.affinity()
	e.gauges()
	e.kill()
	e.drain()
	e.result["wall_seconds"] = time.Since(start).Seconds()
	out, _ := json.MarshalIndent(e.result, "", "  ")
	if err := os.WriteFile(filepath.Join(root, ".build", "deploy", "cluster-result.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("result:\n%s", out)
}

// gieDir is the EPP module's directory (its CRDs), from the module cache.
func gieDir(t *testing.T, root string) string {
	out, err := exec.Command("go", "-C", filepath.Join(root, "deploy"), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("locating the EPP module: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startLogged(t *testing.T, cmd *exec.Cmd, logPath string) chan struct{} {
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		<-done
	})
	return done
}

func (e *env) loadImages() {
	dir := filepath.Join(e.root, "scripts", "demo", "heldout")
	names, err := filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil || len(names) < 200 {
		e.t.Fatalf("held-out scenes under %s: %d, %v", dir, len(names), err)
	}
	slices.Sort(names)
	for _, n := range names[:200] {
		b, err := os.ReadFile(n)
		if err != nil {
			e.t.Fatal(err)
		}
		u := "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
		d, err := imageaffinity.Digest(u)
		if err != nil {
			e.t.Fatal(err)
		}
		e.images = append(e.images, u)
		e.digests = append(e.digests, d)
	}
}

func (e *env) startIris(ctx context.Context, name, ip, logs string) *server {
	iris := filepath.Join(e.root, "bin", "iris")
	cmd := exec.CommandContext(ctx, iris, "serve",
		"--bundle", filepath.Join(e.root, ".build", "bundles", model),
		"--addr", net.JoinHostPort(ip, strconv.Itoa(e.port)),
		"--workers", "2", "--queue-depth", "64", "--log-level", "warn")
	cmd.Dir = e.root
	s := &server{name: name, ip: ip, cmd: cmd}
	s.done = startLogged(e.t, cmd, filepath.Join(logs, name+".log"))
	return s
}

func (e *env) waitReady(s *server) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.url(e.port) + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			e.t.Fatalf("%s exited before it was ready", s.name)
		case <-time.After(200 * time.Millisecond):
		}
	}
	e.t.Fatalf("%s not ready after 3 minutes", s.name)
}

// createPod publishes a server as a ready pod of the pool, as the scheduler and kubelet would.
func (e *env) createPod(ctx context.Context, s *server) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/name":                  "iris",
			"inference.networking.k8s.io/engine-type": "iris",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "iris", Image: "iris"}}},
	}
	if err := e.k8s.Create(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      s.ip,
		PodIPs:     []corev1.PodIP{{IP: s.ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if err := e.k8s.Status().Update(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
}

// setReady flips a pod's Ready condition, as the kubelet does when its readiness probe fails.
func (e *env) setReady(ctx context.Context, s *server, ready bool) {
	pod := &corev1.Pod{}
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: s.name}, pod); err != nil {
		e.t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.Now()}}
	if err := e.k8s.Status().Update(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
}

// answer is what one chat request came back with.
type answer struct {
	status   int
	endpoint string // the upstream Envoy used (x-iris-upstream), or the server asked directly
	content  string
	sha256   string
	err      error
	start    time.Time
	end      time.Time
}

func (e *env) ask(base string, image int, extra map[string]any) answer {
	body := map[string]any{
		"model": model,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": e.images[image]}},
			map[string]any{"type": "text", "text": question},
		}}},
		"max_tokens": 8, "temperature": 0,
	}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	a := answer{start: time.Now()}
	resp, err := e.http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		a.err, a.end = err, time.Now()
		return a
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a.end, a.status, a.err = time.Now(), resp.StatusCode, err
	a.endpoint = resp.Header.Get("x-iris-upstream")
	if h, _, err := net.SplitHostPort(a.endpoint); err == nil {
		a.endpoint = h
	}
	if resp.StatusCode == http.StatusOK {
		var r struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Iris struct {
				Image struct{ Sha256 string } `json:"image"`
			} `json:"iris"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			a.err = fmt.Errorf("answer %q: %w", raw, err)
			return a
		}
		if len(r.Choices) != 1 {
			a.err = fmt.Errorf("answer %q: %d choices", raw, len(r.Choices))
			return a
		}
		a.content, a.sha256 = r.Choices[0].Message.Content, r.Iris.Image.Sha256
	} else {
		a.content = string(raw)
	}
	return a
}

func (e *env) waitRouted() {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if a := e.ask(e.envoy, 0, nil); a.status == http.StatusOK {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatal("no answer through Envoy after 2 minutes (see .build/deploy/cluster-logs)")
}

// cacheHits reads one server's embedding-cache hit counter from /metrics.
func (e *env) cacheHits(s *server) int {
	resp, err := http.Get(s.url(e.port) + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "iris_embedding_cache_lookups_total{") && strings.Contains(line, `result="hit"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				e.t.Fatal(err)
			}
			return int(v)
		}
	}
	return 0
}

func (e *env) byIP(ip string) *server {
	for _, s := range e.servers {
		if s.ip == ip {
			return s
		}
	}
	return nil
}

// check compares a routed answer with a single server's answer for the same image.
func (e *env) check(image int, a answer) {
	if a.status != http.StatusOK || a.err != nil {
		e.t.Errorf("image %d: status %d, err %v: %s", image, a.status, a.err, a.content)
		return
	}
	if want := e.reference[image]; a.content != want {
		e.t.Errorf("image %d through the pool: %q, a single server: %q", image, a.content, want)
	}
	if a.sha256 != e.digests[image] {
		e.t.Errorf("image %d: Iris's sha256 %s, the scorer's key %s", image, a.sha256, e.digests[image])
	}
	if e.byIP(a.endpoint) == nil {
		e.t.Errorf("image %d served by %q, not a pool endpoint", image, a.endpoint)
	}
}

func count(as []answer) map[string]int {
	n := map[string]int{}
	for _, a := range as {
		n[a.endpoint]++
	}
	return n
}

// parity: answers through the pool equal a single server's, for distinct images; it also records
// the reference answers the later phases compare with.
func (e *env) parity() {
	const n = 120
	e.reference = map[int]string{}
	single := e.servers[0].url(e.port)
	for i := range n {
		a := e.ask(single, i, nil)
		if a.status != http.StatusOK {
			e.t.Fatalf("single server, image %d: %d %s", i, a.status, a.content)
		}
		e.reference[i] = a.content
	}
	var routed []answer
	for i := 1; i <= 30; i++ {
		a := e.ask(e.envoy, i, nil)
		e.check(i, a)
		routed = append(routed, a)
	}
	e.result["parity"] = map[string]any{"requests": len(routed), "shares_distinct_images": count(routed)}
	e.t.Logf("parity: 30 distinct images through the pool, all equal to a single server's; shares %v", count(routed))
}

// affinity: an image asked again goes back to the endpoint that served it, whose embedding cache
// then hits.
func (e *env) affinity() {
	before := map[string]int{}
	for _, s := range e.servers {
		before[s.ip] = e.cacheHits(s)
	}
	const images, repeats = 8, 4
	first := map[int]string{}
	same, total := 0, 0
	var all []answer
	for r := range repeats {
		for i := 31; i < 31+images; i++ {
			a := e.ask(e.envoy, i, nil)
			e.check(i, a)
			all = append(all, a)
			if r == 0 {
				first[i] = a.endpoint
				continue
			}
			total++
			if a.endpoint == first[i] {
				same++
			}
		}
	}
	hits := map[string]int{}
	sum := 0
	for _, s := range e.servers {
		hits[s.ip] = e.cacheHits(s) - before[s.ip]
		sum += hits[s.ip]
	}
	e.result["affinity"] = map[string]any{
		"images": images, "repeats": repeats, "repeats_on_first_endpoint": same, "repeats_total": total,
		"cache_hits_by_endpoint": hits, "first_endpoints": count(all[:images]),
	}
	e.t.Logf("affinity: %d of %d repeats on the image's first endpoint; embedding-cache hits %v (sum %d)", same, total, hits, sum)
	if same != total {
		e.t.Errorf("%d of %d repeats left their image's endpoint on an idle pool", total-same, total)
	}
	if sum < total {
		e.t.Errorf("embedding-cache hits rose by %d for %d repeats", sum, total)
	}
}

// gauges: with one endpoint's queue full (long answers sent to it directly), new requests go to
// the others.
func (e *env) gauges() {
	loaded := e.servers[0]
	var wg sync.WaitGroup
	const load = 12
	for i := range load {
		wg.Go(func() {
			e.ask(loaded.url(e.port), 150+i, map[string]any{"max_tokens": 1500, "ignore_eos": true})
		})
	}
	// Wait until the server shows its queue, then for two of the EPP's 50 ms scrapes: the EPP's
	// view is another process's timer, with nothing to wait on but its period.
	for deadline := time.Now().Add(30 * time.Second); e.gauge(loaded, "iris_requests_queued") < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	queued := e.gauge(loaded, "iris_requests_queued")
	var routed []answer
	for i := 40; i < 70; i++ {
		a := e.ask(e.envoy, i, nil)
		e.check(i, a)
		routed = append(routed, a)
	}
	wg.Wait()
	shares := count(routed)
	e.result["gauges"] = map[string]any{"loaded": loaded.ip, "loaded_queue_at_start": queued, "requests": len(routed), "shares": shares}
	e.t.Logf("gauges: %s loaded (queue %v); 30 new requests went %v", loaded.ip, queued, shares)
	if shares[loaded.ip] >= len(routed)/3 {
		e.t.Errorf("the loaded endpoint got %d of %d new requests", shares[loaded.ip], len(routed))
	}
}

func (e *env) gauge(s *server, name string) float64 {
	resp, err := http.Get(s.url(e.port) + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return -1
}

// kill: one endpoint is killed (SIGKILL) while requests flow; the test, as the kubelet would
// after a failed readiness probe, marks its pod not ready once /readyz stops answering. Requests
// in flight on it fail with an error status, none hangs; after the pool drops it, no 5xx.
func (e *env) kill() {
	ctx := e.t.Context()
	victim := e.servers[2]
	const clients, perClient = 4, 30
	var mu sync.Mutex
	var all []answer
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range perClient {
				i := 70 + (c*perClient+k)%50
				a := e.ask(e.envoy, i, map[string]any{"max_tokens": 120, "ignore_eos": true})
				mu.Lock()
				all = append(all, a)
				mu.Unlock()
			}
		})
	}
	// Kill it while it is answering: once 8 answers are back (the phase's "before" requests), at
	// the first scrape that shows two running requests.
	answered := func() int { mu.Lock(); defer mu.Unlock(); return len(all) }
	for deadline := time.Now().Add(60 * time.Second); (answered() < 8 || e.gauge(victim, "iris_requests_running") < 2) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		e.t.Fatal(err)
	}
	// The kubelet's probe: /readyz every 500 ms; the first failure marks the pod not ready.
	for {
		resp, err := http.Get(victim.url(e.port) + "/readyz")
		if err != nil {
			break
		}
		_ = resp.Body.Close()
		time.Sleep(500 * time.Millisecond)
	}
	e.setReady(ctx, victim, false)
	dropped := time.Now()
	wg.Wait()

	var before, before5xx, inflight, inflightFailed, between, between5xx, after, after5xx, ok int
	var slowest time.Duration // from the kill to the end of a failed in-flight request
	for n, a := range all {
		switch {
		case !a.start.After(killed) && !a.end.After(killed):
			before++
			if a.status >= 500 {
				before5xx++
			}
		case !a.start.After(killed):
			if a.endpoint == victim.ip {
				inflight++
				if a.status >= 500 {
					inflightFailed++
					slowest = max(slowest, a.end.Sub(killed))
				}
			}
		case a.start.Before(dropped):
			between++
			if a.status >= 500 {
				between5xx++
			}
		default:
			after++
			if a.status >= 500 || a.err != nil {
				after5xx++
			}
		}
		switch {
		case a.err != nil:
			e.t.Errorf("request %d: %v (a request must end with a status, never hang or break)", n, a.err)
		case a.status == http.StatusOK:
			ok++
			if a.endpoint == victim.ip && a.end.After(killed) {
				e.t.Errorf("request %d: answered by the killed endpoint after the kill", n)
			}
			if len(a.content) == 0 {
				e.t.Errorf("request %d: empty answer", n)
			}
		case a.status >= 500:
			if a.endpoint != victim.ip {
				e.t.Errorf("request %d: %d from %s, not the killed endpoint: %s", n, a.status, a.endpoint, a.content)
			}
		default:
			e.t.Errorf("request %d: status %d: %s", n, a.status, a.content)
		}
	}
	e.result["kill"] = map[string]any{
		"requests": len(all), "ok": ok, "kill_to_not_ready_ms": dropped.Sub(killed).Milliseconds(),
		"ended_before_kill": before, "ended_before_kill_5xx": before5xx,
		"in_flight_on_killed": inflight, "in_flight_on_killed_5xx": inflightFailed,
		"in_flight_failed_within_ms": slowest.Milliseconds(),
		"sent_before_not_ready":      between, "sent_before_not_ready_5xx": between5xx,
		"sent_after_not_ready": after, "sent_after_not_ready_5xx": after5xx,
		"shares": count(all),
	}
	e.t.Logf("kill: %d requests, %d ok; %d ended before the kill (%d 5xx); %d in flight on the killed endpoint (%d 5xx, the last %s after the kill); "+
		"%d sent in the %s before its pod was marked not ready (%d 5xx); %d sent after (%d 5xx)",
		len(all), ok, before, before5xx, inflight, inflightFailed, slowest.Round(time.Millisecond),
		between, dropped.Sub(killed).Round(time.Millisecond), between5xx, after, after5xx)
	if before5xx > 0 {
		e.t.Errorf("%d requests that ended before the kill got a 5xx", before5xx)
	}
	if inflight == 0 {
		e.t.Error("no request was in flight on the killed endpoint: the phase shows nothing")
	}
	if inflightFailed != inflight {
		e.t.Errorf("%d requests in flight on the killed endpoint, %d ended with a 5xx", inflight, inflightFailed)
	}
	if after == 0 {
		e.t.Error("no request was sent after the killed pod was marked not ready: the phase shows nothing")
	}
	if after5xx > 0 {
		e.t.Errorf("%d requests sent after the killed pod was marked not ready got a 5xx", after5xx)
	}
}

// drain: a pod deleted as Kubernetes deletes one leaves the pool at once (the EPP ignores
// terminating pods); after the chart's preStop pause (here 0.5 s) the server gets SIGTERM and
// drains: the answers it is running finish, and it exits cleanly. No request fails.
func (e *env) drain() {
	ctx := e.t.Context()
	victim := e.servers[1]
	const clients, perClient = 3, 4
	var mu sync.Mutex
	var all []answer
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range perClient {
				a := e.ask(e.envoy, (c*perClient+k)%120, map[string]any{"max_tokens": 800, "ignore_eos": true})
				mu.Lock()
				all = append(all, a)
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(20 * time.Second); e.gauge(victim, "iris_requests_running") < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	deleted := time.Now()
	if err := e.k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: victim.name, Namespace: namespace}}); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the chart's preStop pause, as the kubelet runs it
	terminated := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		e.t.Fatal(err)
	}
	wg.Wait()
	select {
	case <-victim.done:
	case <-time.After(time.Minute):
		e.t.Fatalf("%s still running a minute after SIGTERM", victim.name)
	}
	var inflight, inflightOK, routedAfterDelete, failed int
	for n, a := range all {
		if a.err != nil || a.status != http.StatusOK {
			failed++
			e.t.Errorf("request %d: status %d, err %v: %s", n, a.status, a.err, a.content)
		}
		if a.endpoint != victim.ip {
			continue
		}
		if a.start.After(deleted) {
			routedAfterDelete++
		}
		if a.start.Before(terminated) && a.end.After(terminated) {
			inflight++
			if a.status == http.StatusOK {
				inflightOK++
			}
		}
	}
	exit := victim.cmd.ProcessState.ExitCode()
	e.result["drain"] = map[string]any{
		"requests": len(all), "failed": failed, "in_flight_at_sigterm": inflight, "in_flight_finished_200": inflightOK,
		"routed_to_deleted_pod_after_delete": routedAfterDelete, "exit_code": exit, "shares": count(all),
	}
	e.t.Logf("drain: %d requests, %d failed; %d in flight on %s at SIGTERM, %d finished with 200; %d routed to it after its pod was deleted; exit code %d",
		len(all), failed, inflight, victim.ip, inflightOK, routedAfterDelete, exit)
	if inflight == 0 {
		e.t.Error("no request was in flight on the draining server at SIGTERM: the phase shows nothing")
	}
	if routedAfterDelete > 0 {
		e.t.Errorf("%d requests were routed to the pod after its deletion", routedAfterDelete)
	}
	if exit != 0 {
		e.t.Errorf("%s exited with %d after draining", victim.name, exit)
	}
}

// envoyConfig is the data path: an ext_proc filter asking the EPP (FULL_DUPLEX_STREAMED bodies)
// and an ORIGINAL_DST cluster that connects to the address the EPP puts in
// x-gateway-destination-endpoint. x-iris-upstream tells the test which endpoint answered.
func envoyConfig(port, admin, epp int) string {
	return fmt.Sprintf(`admin:
  address: {socket_address: {address: 127.0.0.1, port_value: %d}}
static_resources:
  listeners:
  - name: pool
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: pool
          route_config:
            name: pool
            virtual_hosts:
            - name: pool
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: original_destination_cluster, timeout: 300s}
              response_headers_to_add:
              - header: {key: x-iris-upstream, value: "%%UPSTREAM_HOST%%"}
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service: {envoy_grpc: {cluster_name: epp}, timeout: 10s}
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 300s
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 2s
    lb_policy: CLUSTER_PROVIDED
    original_dst_lb_config: {use_http_header: true, http_header_name: x-gateway-destination-endpoint}
  - name: epp
    type: STATIC
    connect_timeout: 2s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: epp
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
`, admin, port, epp)
}
