// Package srtest runs an in-process schema registry for tests: the subset
// of Confluent Schema Registry's REST API that serializers and Redrive
// use, on a loopback httptest server. It is an HTTP peer, not a mock of
// Redrive's code: any registry client can talk to it.
//
// Served: POST /subjects/{subject}/versions (register), POST
// /subjects/{subject} (look up), GET /subjects, GET
// /subjects/{subject}/versions, GET /subjects/{subject}/versions/{version
// or "latest"}, GET /schemas/ids/{id}, GET /schemas/ids/{id}/versions,
// GET /schemas/ids/{id}/subjects, GET /schemas/types. Registering the same
// schema (text, type and references) again, under any subject, returns its
// existing id, as the real registry does. A Protobuf schema sent as a
// base64 FileDescriptorProto is stored and served as .proto text, as the
// real registry does (proto.go).
package srtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
)

// Reference is a schema reference as the registry's API spells it.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type schema struct {
	Text       string
	Type       string // "" for AVRO, as the registry omits it
	References []Reference
}

func (s schema) key() string {
	b, _ := json.Marshal(s)
	return string(b)
}

type version struct {
	id      int
	version int
}

// Registry is a running test registry.
type Registry struct {
	srv *httptest.Server

	mu       sync.Mutex
	byID     map[int]schema
	ids      map[string]int
	subjects map[string][]version
	nextID   int

	// protoFiles are the Protobuf descriptors registered as descriptors
	// (see proto.go), resolving the imports of later ones.
	protoFiles *protoregistry.Files

	down     atomic.Bool
	downOn   atomic.Int64 // a schema id: down once it has been served
	requests atomic.Int64
	auth     func(*http.Request) bool
	tls      bool
}

// Option configures a Registry.
type Option func(*Registry)

// BasicAuth makes the registry require HTTP basic auth.
func BasicAuth(user, pass string) Option {
	return func(r *Registry) {
		r.auth = func(req *http.Request) bool {
			u, p, ok := req.BasicAuth()
			return ok && u == user && p == pass
		}
	}
}

// BearerToken makes the registry require "Authorization: Bearer token".
func BearerToken(token string) Option {
	return func(r *Registry) {
		r.auth = func(req *http.Request) bool { return req.Header.Get("Authorization") == "Bearer "+token }
	}
}

// TLS serves HTTPS with httptest's certificate (Client returns a client
// that trusts it).
func TLS() Option { return func(r *Registry) { r.tls = true } }

// New starts a registry closed when t ends.
func New(t testing.TB, opts ...Option) *Registry {
	r := &Registry{byID: map[int]schema{}, ids: map[string]int{}, subjects: map[string][]version{}, nextID: 1,
		protoFiles: &protoregistry.Files{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subjects/{subject}/versions", r.register)
	mux.HandleFunc("POST /subjects/{subject}", r.lookup)
	mux.HandleFunc("GET /subjects", r.listSubjects)
	mux.HandleFunc("GET /subjects/{subject}/versions", r.listVersions)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", r.getVersion)
	mux.HandleFunc("GET /schemas/ids/{id}", r.getID)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", r.idVersions)
	mux.HandleFunc("GET /schemas/ids/{id}/subjects", r.idSubjects)
	mux.HandleFunc("GET /schemas/types", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, []string{"AVRO", "JSON", "PROTOBUF"})
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if r.down.Load() {
			fail(w, http.StatusServiceUnavailable, 50003, "registry is down (srtest)")
			return
		}
		if r.auth != nil && !r.auth(req) {
			fail(w, http.StatusUnauthorized, 401, "Unauthorized")
			return
		}
		mux.ServeHTTP(w, req)
	})
	r.srv = httptest.NewUnstartedServer(handler)
	for _, o := range opts {
		o(r)
	}
	if r.tls {
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.srv.URL }

// Client is an HTTP client for the registry (trusting its certificate
// when it serves TLS).
func (r *Registry) Client() *http.Client { return r.srv.Client() }

// SetDown makes every request fail with 503 (true) or be served (false).
func (r *Registry) SetDown(down bool) { r.down.Store(down) }

// DownAfterServing makes the registry go down (as SetDown(true)) right
// after it has served schema id by id, to take it down at a known point of
// a test. Zero turns it off.
func (r *Registry) DownAfterServing(id int) { r.downOn.Store(int64(id)) }

// Requests counts the requests received so far.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// Register registers a schema under subject directly (no HTTP), returning
// its id. typ is "AVRO", "PROTOBUF" or "JSON".
func (r *Registry) Register(subject, typ, text string, refs ...Reference) int {
	if typ == "AVRO" {
		typ = ""
	}
	id, _ := r.add(subject, schema{Text: text, Type: typ, References: refs})
	return id
}

func (r *Registry) add(subject string, s schema) (id, ver int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[s.key()]
	if !ok {
		id = r.nextID
		r.nextID++
		r.ids[s.key()] = id
		r.byID[id] = s
	}
	for _, v := range r.subjects[subject] {
		if v.id == id {
			return id, v.version
		}
	}
	ver = len(r.subjects[subject]) + 1
	r.subjects[subject] = append(r.subjects[subject], version{id: id, version: ver})
	return id, ver
}

type schemaBody struct {
	Subject    string      `json:"subject,omitempty"`
	Version    int         `json:"version,omitempty"`
	ID         int         `json:"id,omitempty"`
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
}

func (r *Registry) readBody(w http.ResponseWriter, req *http.Request) (schema, bool) {
	var b schemaBody
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 8<<20)).Decode(&b); err != nil || b.Schema == "" {
		fail(w, http.StatusUnprocessableEntity, 42201, "Invalid schema")
		return schema{}, false
	}
	if b.SchemaType == "AVRO" {
		b.SchemaType = ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.SchemaType == "PROTOBUF" {
		text, ok, err := protoFromDescriptor(b.Schema, r.protoFiles)
		if err != nil {
			fail(w, http.StatusUnprocessableEntity, 42201, "Invalid schema: "+err.Error())
			return schema{}, false
		}
		if ok {
			b.Schema = text
		}
	}
	for _, ref := range b.References {
		if _, ok := r.versionLocked(ref.Subject, strconv.Itoa(ref.Version)); !ok {
			fail(w, http.StatusUnprocessableEntity, 42201, "Invalid schema: reference "+ref.Name+" not found")
			return schema{}, false
		}
	}
	return schema{Text: b.Schema, Type: b.SchemaType, References: b.References}, true
}

func (r *Registry) register(w http.ResponseWriter, req *http.Request) {
	s, ok := r.readBody(w, req)
	if !ok {
		return
	}
	id, _ := r.add(req.PathValue("subject"), s)
	reply(w, http.StatusOK, map[string]int{"id": id})
}

func (r *Registry) lookup(w http.ResponseWriter, req *http.Request) {
	s, ok := r.readBody(w, req)
	if !ok {
		return
	}
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	versions, ok := r.subjects[subject]
	if !ok {
		fail(w, http.StatusNotFound, 40401, "Subject '"+subject+"' not found.")
		return
	}
	id, ok := r.ids[s.key()]
	if ok {
		for _, v := range versions {
			if v.id == id {
				reply(w, http.StatusOK, r.bodyLocked(subject, v))
				return
			}
		}
	}
	fail(w, http.StatusNotFound, 40403, "Schema not found")
}

func (r *Registry) versionLocked(subject, v string) (version, bool) {
	versions := r.subjects[subject]
	if len(versions) == 0 {
		return version{}, false
	}
	if v == "latest" || v == "-1" {
		return versions[len(versions)-1], true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > len(versions) {
		return version{}, false
	}
	return versions[n-1], true
}

func (r *Registry) bodyLocked(subject string, v version) schemaBody {
	s := r.byID[v.id]
	return schemaBody{Subject: subject, Version: v.version, ID: v.id, Schema: s.Text, SchemaType: s.Type, References: s.References}
}

func (r *Registry) listSubjects(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	subjects := make([]string, 0, len(r.subjects))
	for s := range r.subjects {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	reply(w, http.StatusOK, subjects)
}

func (r *Registry) listVersions(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	versions, ok := r.subjects[req.PathValue("subject")]
	if !ok {
		fail(w, http.StatusNotFound, 40401, "Subject not found.")
		return
	}
	out := make([]int, len(versions))
	for i, v := range versions {
		out[i] = v.version
	}
	reply(w, http.StatusOK, out)
}

func (r *Registry) getVersion(w http.ResponseWriter, req *http.Request) {
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.subjects[subject]; !ok {
		fail(w, http.StatusNotFound, 40401, "Subject '"+subject+"' not found.")
		return
	}
	v, ok := r.versionLocked(subject, req.PathValue("version"))
	if !ok {
		fail(w, http.StatusNotFound, 40402, "Version not found.")
		return
	}
	reply(w, http.StatusOK, r.bodyLocked(subject, v))
}

func (r *Registry) idParam(w http.ResponseWriter, req *http.Request) (int, schema, bool) {
	id, err := strconv.Atoi(req.PathValue("id"))
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if err != nil || !ok {
		fail(w, http.StatusNotFound, 40403, "Schema "+req.PathValue("id")+" not found")
		return 0, schema{}, false
	}
	return id, s, true
}

func (r *Registry) getID(w http.ResponseWriter, req *http.Request) {
	id, s, ok := r.idParam(w, req)
	if !ok {
		return
	}
	reply(w, http.StatusOK, schemaBody{Schema: s.Text, SchemaType: s.Type, References: s.References})
	if id != 0 && r.downOn.CompareAndSwap(int64(id), 0) {
		r.down.Store(true)
	}
}

func (r *Registry) usesLocked(id int) []map[string]any {
	var out []map[string]any
	subjects := make([]string, 0, len(r.subjects))
	for s := range r.subjects {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	for _, s := range subjects {
		for _, v := range r.subjects[s] {
			if v.id == id {
				out = append(out, map[string]any{"subject": s, "version": v.version})
			}
		}
	}
	return out
}

func (r *Registry) idVersions(w http.ResponseWriter, req *http.Request) {
	id, _, ok := r.idParam(w, req)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reply(w, http.StatusOK, r.usesLocked(id))
}

func (r *Registry) idSubjects(w http.ResponseWriter, req *http.Request) {
	id, _, ok := r.idParam(w, req)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var subjects []string
	for _, u := range r.usesLocked(id) {
		subjects = append(subjects, u["subject"].(string))
	}
	reply(w, http.StatusOK, subjects)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	reply(w, status, map[string]any{"error_code": code, "message": msg})
}
