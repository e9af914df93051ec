// Package console is Redrive's web console: a small JavaScript application,
// embedded in the binary and served at /ui/, that talks to the same JSON API
// as the CLI. No build step and no external requests: the files under
// static/ are served as they are.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
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
	// Login says single sign-on is configured: the console offers "Log in
	// with SSO" (/auth/login) beside the key prompt.
	Login bool
	// TraceURL links a record's trace id: {trace_id} is replaced by it
	// (REDRIVE_TRACE_URL). Empty: the id is shown unlinked.
	TraceURL string
	// KafkaBrokers are the brokers the server is configured with (redrive
	// dev: its in-process one): an empty DLQ's hint shows how to produce
	// to them with kcat.
	KafkaBrokers []string
}

// csp allows the console's own files only, and no page to frame it
// (frame-ancestors, with X-Frame-Options for older browsers): a framed
// console could be clicked through by the page around it.
const csp = "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

// Handler serves the console: the assets under /ui/assets/{version}/, and
// index.html for every other path under /ui/ (the application routes itself).
//
// The version is a hash of the assets, so a browser may keep them for good
// (they are immutable under their URL) and a new binary's index points at
// new URLs. The index also lists every module for preloading: the browser
// fetches them all at once instead of one level of imports at a time.
func Handler(cfg Config) http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	version, modules, err := inventory(files)
	if err != nil {
		panic(err)
	}
	index, err := renderIndex(files, indexData{
		Assets:   Prefix + "assets/" + version + "/",
		Modules:  modules,
		Auth:     !cfg.AuthDisabled,
		Login:    cfg.Login,
		TraceURL: cfg.TraceURL,
		Brokers:  strings.Join(cfg.KafkaBrokers, ","),
	})
	if err != nil {
		panic(err)
	}
	assets := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, Prefix)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Frame-Options", "DENY")
		if under, isAsset := strings.CutPrefix(rel, "assets/"); isAsset {
			v, file, ok := strings.Cut(under, "/")
			if !ok || !isFile(files, "assets/"+file) {
				// Files only: a directory is not listed.
				http.NotFound(w, r)
				return
			}
			if v == version {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				// A page from an older binary: it gets today's files, uncached.
				w.Header().Set("Cache-Control", "no-cache")
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/assets/" + strings.TrimPrefix(path.Clean("/"+file), "/")
			assets.ServeHTTP(w, r2)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(index)
	})
}

// isFile reports whether name (a path under static/, possibly unclean) is a
// file, not a directory.
func isFile(files fs.FS, name string) bool {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	st, err := fs.Stat(files, name)
	return err == nil && !st.IsDir()
}

// inventory hashes every asset into a version and lists the JavaScript
// modules, relative to the assets directory.
func inventory(files fs.FS) (version string, modules []string, err error) {
	h := sha256.New()
	err = fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		h.Write([]byte(p))
		h.Write(b)
		if strings.HasSuffix(p, ".js") {
			modules = append(modules, strings.TrimPrefix(p, "assets/"))
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12], modules, err
}

type indexData struct {
	Assets  string   // the versioned assets URL, ending in /
	Modules []string // every module, to preload
	Auth    bool     // whether the API wants a key
	Login   bool     // whether single sign-on login is offered
	// TraceURL is the trace link template (Config.TraceURL).
	TraceURL string
	// Brokers are Config.KafkaBrokers, comma-separated (as kcat -b takes them).
	Brokers string
}

func renderIndex(files fs.FS, data indexData) ([]byte, error) {
	tmpl, err := template.ParseFS(files, "index.html")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
