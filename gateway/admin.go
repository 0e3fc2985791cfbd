package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves the admin listener (contract §1, §5):
//
//	GET    /healthz                          200 while the process runs
//	GET    /readyz                           200 while the store is reachable and fit, else 503
//	GET    /metrics                          Prometheus exposition of Options.Metrics
//	GET    /v1/records/{tenant}/{tool}/{key} the receipt (path segments URL-escaped), 404 if none
//	DELETE /v1/records/{tenant}/{tool}/{key} removes the record, 204; 404 if none
//
// When token is not empty, the records API requires `Authorization: Bearer <token>`, compared in
// constant time; health endpoints never do. Errors are RFC 9457 problems.
func (g *Gateway) AdminHandler(token string) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), g.opts.StoreTimeout)
		defer cancel()
		if err := g.store.Ping(ctx); err != nil {
			newProblem(fmt.Errorf("%w: %v", ErrStoreUnavailable, err), "", "").write(w, 1)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ready\n"))
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(g.opts.Metrics, promhttp.HandlerOpts{}))
	r.Group(func(r chi.Router) {
		r.Use(requireBearer(token))
		r.Get("/v1/records/{tenant}/{tool}/{key}", g.getRecord)
		r.Delete("/v1/records/{tenant}/{tool}/{key}", g.deleteRecord)
	})
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		newProblem(fmt.Errorf("%w at %s", ErrNoRoute, req.URL.Path), "", "").write(w, 0)
	})
	return r
}

func requireBearer(token string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if token == "" {
			return next
		}
		want := []byte("Bearer " + token)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="idemgateway-admin"`)
				(&problem{Type: ProblemTypePrefix + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
					Detail: "the records API needs the admin bearer token"}).write(w, 0)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// recordKey is the store key named by the admin path. chi matches on the escaped path, so each
// segment is unescaped here and escaped again the one way scopeKey does.
func recordKey(r *http.Request) (string, error) {
	var parts [3]string
	for i, name := range []string{"tenant", "tool", "key"} {
		v, err := url.PathUnescape(chi.URLParam(r, name))
		if err != nil {
			return "", fmt.Errorf("%w: path segment %s: %v", ErrInvalidKey, name, err)
		}
		parts[i] = v
	}
	return scopeKey(parts[0], parts[1], parts[2]), nil
}

func (g *Gateway) getRecord(w http.ResponseWriter, r *http.Request) {
	key, err := recordKey(r)
	if err != nil {
		newProblem(err, "", "").write(w, 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.opts.StoreTimeout)
	defer cancel()
	state, payload, err := g.store.Get(ctx, key)
	switch {
	case err != nil:
		newProblem(fmt.Errorf("%w: %v", ErrStoreUnavailable, err), "", "").write(w, 1)
		return
	case state == "":
		newProblem(fmt.Errorf("%w for that tenant, tool and key", ErrNoRecord), "", "").write(w, 0)
		return
	}
	rec, err := decodeRecord(state, payload)
	if err != nil {
		newProblem(err, "", "").write(w, 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(rec.Receipt)
}

func (g *Gateway) deleteRecord(w http.ResponseWriter, r *http.Request) {
	key, err := recordKey(r)
	if err != nil {
		newProblem(err, "", "").write(w, 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.opts.StoreTimeout)
	defer cancel()
	existed, err := g.store.Delete(ctx, key)
	switch {
	case err != nil:
		newProblem(fmt.Errorf("%w: %v", ErrStoreUnavailable, err), "", "").write(w, 1)
	case !existed:
		newProblem(fmt.Errorf("%w for that tenant, tool and key", ErrNoRecord), "", "").write(w, 0)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
