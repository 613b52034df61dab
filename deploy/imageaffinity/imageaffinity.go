// Package imageaffinity is an Endpoint Picker (EPP) scorer that sends a request whose image an
// Iris endpoint served recently back to that endpoint, where the image's vision-tower output is
// still in the embedding cache.
//
// The key is the model name and the sha256 of the image's bytes as sent (the base64 payload of
// the request's data URL, decoded): the digest Iris reports in iris.image.sha256 and the first
// part of its embedding-cache key (docs/api.md). The plugin remembers, for a bounded number of
// keys (least recently used out), the endpoint that last served each; it scores that endpoint 1
// and every other 0, unless that endpoint is busy (its queue longer than the shortest by more
// than QueueSlack, or its KV cache fuller than KVCacheThreshold): then it scores every
// endpoint 0 and the load scorers alone decide. Whichever endpoint is picked becomes the key's
// endpoint (PreRequest), so an image follows its request when load moves it.
package imageaffinity

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/requestcontrol"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
)

// Type is the plugin type named in the EPP's configuration file.
const Type = "iris-image-affinity-scorer"

// Parameters are the plugin's configuration (the `parameters` of its entry in the EPP's
// configuration file); a field left out keeps its default.
type Parameters struct {
	// Capacity is how many (model, image) keys are remembered; the least recently used is
	// dropped beyond it. Each entry takes about 300 bytes of heap.
	Capacity int `json:"capacity"`
	// QueueSlack is how many more waiting requests (iris_requests_queued) the remembered
	// endpoint may have than the candidate with the fewest before affinity gives way.
	QueueSlack int `json:"queueSlack"`
	// KVCacheThreshold is the KV-cache use (iris_kv_cache_utilization, 0 to 1) above which the
	// remembered endpoint counts as busy.
	KVCacheThreshold float64 `json:"kvCacheThreshold"`
}

// DefaultParameters are the values a configuration that omits a field gets.
var DefaultParameters = Parameters{Capacity: 65536, QueueSlack: 2, KVCacheThreshold: 0.9}

func (p Parameters) validate() error {
	switch {
	case p.Capacity < 1:
		return fmt.Errorf("capacity must be at least 1, got %d", p.Capacity)
	case p.QueueSlack < 0:
		return fmt.Errorf("queueSlack must not be negative, got %d", p.QueueSlack)
	case p.KVCacheThreshold <= 0 || p.KVCacheThreshold > 1:
		return fmt.Errorf("kvCacheThreshold must be in (0, 1], got %g", p.KVCacheThreshold)
	}
	return nil
}

// key identifies an image served by one model: the embedding cache is per model.
type key struct {
	model  string
	digest [sha256.Size]byte
}

// keyState carries a request's key from Score to PreRequest.
type keyState struct{ k key }

func (s *keyState) Clone() plugin.StateData { c := *s; return &c }

const stateKey plugin.StateKey = Type + "/key"

// Scorer is the plugin: a scheduling.Scorer and a requestcontrol.PreRequest.
type Scorer struct {
	name   plugin.TypedName
	params Parameters
	served *lru.Cache[key, types.NamespacedName]
	state  *plugin.PluginState
}

var (
	_ scheduling.Scorer         = (*Scorer)(nil)
	_ requestcontrol.PreRequest = (*Scorer)(nil)
)

// Factory builds the plugin from its configuration entry; it is what the EPP's plugin
// registry holds under [Type].
func Factory(name string, raw json.RawMessage, handle plugin.Handle) (plugin.Plugin, error) {
	params := DefaultParameters
	if len(raw) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&params); err != nil {
			return nil, fmt.Errorf("%s: parameters: %w", Type, err)
		}
	}
	s, err := New(handle.Context(), params)
	if err != nil {
		return nil, err
	}
	if name != "" {
		s.name.Name = name
	}
	return s, nil
}

// New returns a scorer with the given parameters; ctx bounds the life of its per-request state.
func New(ctx context.Context, params Parameters) (*Scorer, error) {
	if err := params.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Type, err)
	}
	served, err := lru.New[key, types.NamespacedName](params.Capacity)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Type, err)
	}
	return &Scorer{
		name:   plugin.TypedName{Type: Type, Name: Type},
		params: params,
		served: served,
		state:  plugin.NewPluginState(ctx),
	}, nil
}

// TypedName implements plugin.Plugin.
func (s *Scorer) TypedName() plugin.TypedName { return s.name }

// Category implements scheduling.Scorer.
func (s *Scorer) Category() scheduling.ScorerCategory { return scheduling.Affinity }

// Remembered returns how many keys the scorer holds now.
func (s *Scorer) Remembered() int { return s.served.Len() }

// Score implements scheduling.Scorer.
func (s *Scorer) Score(ctx context.Context, _ *scheduling.CycleState, req *scheduling.LLMRequest, endpoints []scheduling.Endpoint) map[scheduling.Endpoint]float64 {
	scores := make(map[scheduling.Endpoint]float64, len(endpoints))
	for _, ep := range endpoints {
		scores[ep] = 0
	}
	k, ok, err := requestKey(req)
	if err != nil {
		// Iris refuses the request with a 400 wherever it lands: nothing to prefer.
		log.FromContext(ctx).V(1).Info("no image key", "plugin", s.name.String(), "err", err)
	}
	if !ok {
		return scores
	}
	if req.RequestId != "" {
		s.state.Write(req.RequestId, stateKey, &keyState{k: k})
	}
	last, ok := s.served.Get(k)
	if !ok {
		return scores
	}
	var target scheduling.Endpoint
	shortest := -1
	for _, ep := range endpoints {
		m := ep.GetMetrics()
		if shortest < 0 || m.WaitingQueueSize < shortest {
			shortest = m.WaitingQueueSize
		}
		if ep.GetMetadata().NamespacedName == last {
			target = ep
		}
	}
	if target == nil {
		return scores // the endpoint left the pool, or a filter left it out
	}
	m := target.GetMetrics()
	if m.WaitingQueueSize-shortest > s.params.QueueSlack || m.KVCacheUsagePercent > s.params.KVCacheThreshold {
		return scores
	}
	scores[target] = 1
	return scores
}

// PreRequest implements requestcontrol.PreRequest: the picked endpoint becomes the one that
// most recently served the request's image.
func (s *Scorer) PreRequest(_ context.Context, req *scheduling.LLMRequest, result *scheduling.SchedulingResult) {
	if req == nil || result == nil {
		return
	}
	st, err := plugin.ReadPluginStateKey[*keyState](s.state, req.RequestId, stateKey)
	s.state.Delete(req.RequestId)
	var k key
	if err == nil {
		k = st.k
	} else {
		var ok bool
		if k, ok, _ = requestKey(req); !ok {
			return
		}
	}
	primary := result.ProfileResults[result.PrimaryProfileName]
	if primary == nil || len(primary.TargetEndpoints) == 0 {
		return
	}
	s.served.Add(k, primary.TargetEndpoints[0].GetMetadata().NamespacedName)
}

// requestKey returns the request's (model, image digest); ok is false for a request without an
// image data URL. Iris serves one image per request: the first image part is the one.
func requestKey(req *scheduling.LLMRequest) (key, bool, error) {
	if req == nil || req.Body == nil || req.Body.ChatCompletions == nil {
		return key{}, false, nil
	}
	for _, msg := range req.Body.ChatCompletions.Messages {
		for _, part := range msg.Content.Structured {
			if part.Type != "image_url" || part.ImageURL.Url == "" {
				continue
			}
			data, err := decodeDataURL(part.ImageURL.Url)
			if err != nil {
				return key{}, false, err
			}
			return key{model: req.TargetModel, digest: sha256.Sum256(data)}, true, nil
		}
	}
	return key{}, false, nil
}

// Digest returns the hex sha256 of a data URL's decoded payload, as Iris reports it in
// iris.image.sha256.
func Digest(dataURL string) (string, error) {
	data, err := decodeDataURL(dataURL)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

var errNotDataURL = errors.New("the image URL is not a base64 data: URL")

// decodeDataURL decodes "data:<media type>[;params];base64,<payload>" as Iris's gateway does:
// scheme and "base64" case-insensitive, the standard alphabet padded or not, CR and LF skipped.
// Media types are not checked: a URL Iris refuses gets a 400 there, whatever the routing.
func decodeDataURL(u string) ([]byte, error) {
	const scheme = "data:"
	if len(u) < len(scheme) || !strings.EqualFold(u[:len(scheme)], scheme) {
		return nil, errNotDataURL
	}
	header, payload, ok := strings.Cut(u[len(scheme):], ",")
	if !ok {
		return nil, errNotDataURL
	}
	semi := strings.LastIndexByte(header, ';')
	if semi < 0 || !strings.EqualFold(strings.TrimSpace(header[semi+1:]), "base64") {
		return nil, errNotDataURL
	}
	n := len(payload) - strings.Count(payload, "\n") - strings.Count(payload, "\r")
	enc := base64.StdEncoding.Strict()
	if n%4 != 0 && strings.IndexByte(payload, '=') < 0 {
		enc = base64.RawStdEncoding.Strict()
	}
	data, err := enc.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("the data URL's payload: %w", err)
	}
	if len(data) == 0 {
		return nil, errors.New("the data URL carries no bytes")
	}
	return data, nil
}
