package server

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/middleware"
	"github.com/iris-vlm/iris/gateway/openai"
)

// listModels serves GET /v1/models: every loaded bundle, in load order.
func (s *Server) listModels(c *gin.Context) {
	infos := s.backend.Models()
	list := openai.ModelList{Object: openai.ObjectList, Data: make([]openai.Model, 0, len(infos))}
	for _, m := range infos {
		list.Data = append(list.Data, modelOf(m))
	}
	writeJSON(c, http.StatusOK, list)
}

// getModel serves GET /v1/models/{model}.
func (s *Server) getModel(c *gin.Context) {
	name := c.Param("model")
	m, ok := s.backend.Model(name)
	if !ok {
		middleware.Render(c, &middleware.HTTPError{Status: http.StatusNotFound, Code: "model_not_found", Param: "model",
			Message: "no such model; GET /v1/models lists them"})
		return
	}
	writeJSON(c, http.StatusOK, modelOf(m))
}

func modelOf(m core.ModelInfo) openai.Model {
	tasks := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		tasks[i] = string(t)
	}
	return openai.Model{
		ID: m.Name, Object: openai.ObjectModel, Created: m.Created.Unix(), OwnedBy: "iris",
		Iris: &openai.IrisModel{Family: m.Family, Tasks: tasks, Digest: m.Digest, ContextLength: m.ContextLength, MaxNewTokens: m.MaxNewTokens},
	}
}

// healthz serves GET /healthz: the process is up and serving HTTP.
func (s *Server) healthz(c *gin.Context) {
	writeJSON(c, http.StatusOK, gin.H{"status": "ok"})
}

// readyz serves GET /readyz: 200 once the runtime reports ready (bundles loaded, plugins
// compiled, warm-up done), 503 before that and while draining for shutdown.
func (s *Server) readyz(c *gin.Context) {
	if s.draining.Load() {
		middleware.Record(c, &middleware.HTTPError{Status: http.StatusServiceUnavailable, Code: "draining"})
		writeJSON(c, http.StatusServiceUnavailable, gin.H{"status": "draining"})
		return
	}
	if err := s.backend.Ready(); err != nil {
		middleware.Record(c, &middleware.HTTPError{Status: http.StatusServiceUnavailable, Code: "not_ready", Err: err})
		writeJSON(c, http.StatusServiceUnavailable, gin.H{"status": "not_ready", "reason": err.Error()})
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"status": "ready"})
}
