// Package auth checks API keys (docs/api.md). Keys are kept hashed at rest:
// the keys file holds each key's name, scope and the hex SHA-256 of the key.
// A presented key is hashed and compared with every stored digest in constant
// time. It never logs or returns a key.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Scope is what a key may do.
type Scope string

const (
	// ScopeRead may call every read-only endpoint.
	ScopeRead Scope = "read"
	// ScopeWrite may also change state (retry, delete, configure).
	ScopeWrite Scope = "write"
)

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s == ScopeRead || s == ScopeWrite }

// Allows reports whether a key of scope s may make a call needing need.
func (s Scope) Allows(need Scope) bool { return s == ScopeWrite || need == ScopeRead && s == ScopeRead }

// Key is one API key as stored: never the key itself.
type Key struct {
	Name   string `yaml:"name"`
	Scope  Scope  `yaml:"scope"`
	SHA256 string `yaml:"sha256"`
	// Unmask says whether the key sees masked fields in clear
	// (docs/security.md, "Data masking"). Default: a write key does, a
	// read key does not; `unmask: false` makes a write key for automation
	// that retries and edits without ever seeing them.
	Unmask *bool `yaml:"unmask,omitempty"`
	digest []byte
}

// Unmasks reports whether the key sees masked fields in clear.
func (k Key) Unmasks() bool {
	if k.Unmask != nil {
		return *k.Unmask
	}
	return k.Scope == ScopeWrite
}

// Keys is a loaded keys file. It may hold no key (every call is refused).
type Keys struct {
	keys []Key
}

// Len is how many keys there are.
func (ks *Keys) Len() int {
	if ks == nil {
		return 0
	}
	return len(ks.keys)
}

// file is the keys file's shape.
type file struct {
	Keys []Key `yaml:"keys"`
}

// Load reads a keys file: `keys: [{name, scope, sha256}, ...]`. Every problem
// is reported with the entry it is in; unknown fields are errors.
func Load(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read API keys file: %w", err)
	}
	ks, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("API keys file %s: %w", path, err)
	}
	return ks, nil
}

// Parse reads the content of a keys file.
func Parse(data []byte) (*Keys, error) {
	var f file
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	names := map[string]bool{}
	for i := range f.Keys {
		k := &f.Keys[i]
		at := fmt.Sprintf("keys[%d]", i)
		if k.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name: required", at))
		} else if names[k.Name] {
			errs = append(errs, fmt.Errorf("%s.name: duplicate name %q", at, k.Name))
		}
		names[k.Name] = true
		if !k.Scope.Valid() {
			errs = append(errs, fmt.Errorf("%s.scope: must be read or write, got %q", at, k.Scope))
		}
		d, err := hex.DecodeString(k.SHA256)
		if err != nil || len(d) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s.sha256: must be the 64 hex digits of the key's SHA-256", at))
		}
		k.digest = d
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Keys{keys: f.Keys}, nil
}

// NewKeys builds Keys from entries (for tests and embedding).
func NewKeys(entries ...Key) (*Keys, error) {
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, k := range entries {
		fmt.Fprintf(&b, "  - {name: %q, scope: %q, sha256: %q}\n", k.Name, k.Scope, k.SHA256)
	}
	return Parse([]byte(b.String()))
}

// Authenticate returns the key matching secret. It hashes secret once and
// compares the digest with every stored one in constant time, without
// stopping at a match, so timing says nothing about which key matched.
// A nil Keys knows no key.
func (ks *Keys) Authenticate(secret string) (Key, bool) {
	if ks == nil {
		return Key{}, false
	}
	sum := sha256.Sum256([]byte(secret))
	match := -1
	for i := range ks.keys {
		if subtle.ConstantTimeCompare(sum[:], ks.keys[i].digest) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Key{}, false
	}
	return ks.keys[match], true
}

// Generate makes a new random key and its digest: 32 random bytes, base64url,
// prefixed "rdk_" so that leaked keys are easy to grep for.
func Generate() (secret, digest string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	secret = "rdk_" + base64.RawURLEncoding.EncodeToString(b)
	return secret, Digest(secret), nil
}

// Digest is the hex SHA-256 of a key, as the keys file stores it.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
