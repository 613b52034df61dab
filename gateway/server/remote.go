package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/middleware"
	"github.com/iris-vlm/iris/gateway/openai"
)

// Codes of remote image fetches.
const (
	codeImageFetchFailed = "image_fetch_failed"
	codeImageTooLarge    = "image_too_large"
)

// fetcher downloads images from the hosts an operator allowed. It follows no redirects, so an
// allowed host cannot send the gateway elsewhere.
type fetcher struct {
	cfg    config.RemoteImages
	hosts  map[string]bool
	client *http.Client
}

// newFetcher returns nil when remote images are disabled.
func newFetcher(cfg config.RemoteImages) *fetcher {
	if !cfg.Enabled() {
		return nil
	}
	f := &fetcher{cfg: cfg, hosts: make(map[string]bool, len(cfg.AllowHosts))}
	for _, h := range cfg.AllowHosts {
		f.hosts[strings.ToLower(h)] = true
	}
	f.client = &http.Client{
		Timeout:       cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f
}

// fetch downloads u. Errors never quote the URL: it may carry the client's secrets.
func (f *fetcher) fetch(ctx context.Context, u *url.URL, param string) ([]byte, *middleware.HTTPError) {
	switch {
	case u.Scheme == "http" && !f.cfg.AllowHTTP, u.Scheme != "http" && u.Scheme != "https":
		return nil, badRequest(openai.CodeImageURLNotAllowed, param, "only https image URLs may be fetched")
	case !f.hosts[strings.ToLower(u.Host)]:
		return nil, badRequest(openai.CodeImageURLNotAllowed, param, "the image URL's host is not on this server's allow list")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, badRequest(openai.CodeInvalidImageURL, param, "the image URL is not valid")
	}
	req.Header.Set("Accept", "image/png, image/jpeg")
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
			return nil, clientClosed(err)
		}
		return nil, fetchFailed(param, "the image could not be fetched", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fetchFailed(param, fmt.Sprintf("fetching the image answered HTTP %d", resp.StatusCode), nil)
	}
	tooLarge := &middleware.HTTPError{Status: http.StatusRequestEntityTooLarge, Code: codeImageTooLarge, Param: param,
		Message: fmt.Sprintf("the fetched image is over the %d-byte limit", f.cfg.MaxBytes)}
	if resp.ContentLength > f.cfg.MaxBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	switch {
	case err != nil:
		return nil, fetchFailed(param, "the image could not be fetched", err)
	case int64(len(data)) > f.cfg.MaxBytes:
		return nil, tooLarge
	case len(data) == 0:
		return nil, badRequest(openai.CodeImageEmpty, param, "the fetched image is empty")
	}
	return data, nil
}

func fetchFailed(param, msg string, err error) *middleware.HTTPError {
	return &middleware.HTTPError{Status: http.StatusBadRequest, Code: codeImageFetchFailed, Param: param, Message: msg, Err: err}
}
