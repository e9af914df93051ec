// Package console is Redrive's web console: a small JavaScript application,
// embedded in the binary and served at /ui/, that talks to the same JSON API
// as the CLI. No build step and no external requests: the files under
// static/ are served as they are.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Config is what the console needs to know about the server.
type Config struct {
	// AuthDisabled says the API takes no keys (redrive dev): the console
	// shows the same warning as the log instead of asking for a key.
	AuthDisabled bool
}

// Handler serves the console: /ui/config.json, the assets, and index.html
// for every other path under /ui/ (the application routes itself).
func Handler(cfg Config) http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	assets := http.FileServerFS(files)
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	conf, _ := json.Marshal(map[string]bool{"auth": !cfg.AuthDisabled})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, Prefix)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:")
		switch {
		case rel == "config.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(conf)
		case strings.HasPrefix(rel, "assets/"):
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + path.Clean(rel)
			assets.ServeHTTP(w, r2)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(index)
		}
	})
}
