package sso

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"
)

// keySet is the issuer's published keys, verifying tokens' signatures for
// go-oidc. It replaces go-oidc's remote key set, which fetches the key set
// again for every key id it does not hold: tokens forged with made-up key
// ids would turn each request into a request to the identity provider. Here
// an unknown key id makes the set be fetched again only within a budget of
// keyRefetchBurst fetches, refilled one every keyRefetchEvery: a key the
// issuer rotated in is learnt by its first token (or within that interval
// while a flood spends the budget), and a flood of made-up ids costs the
// provider a request per interval.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu     sync.Mutex
	keys   map[string]crypto.PublicKey // by key id
	budget *rate.Limiter               // fetches, successful or not
}

// The key set's refetch budget.
const (
	keyRefetchEvery = 10 * time.Second
	keyRefetchBurst = 3
)

// maxKeySetBytes bounds the key set document read.
const maxKeySetBytes = 1 << 20

func newKeySet(url string, client *http.Client, now func() time.Time) *keySet {
	return &keySet{url: url, client: client, now: now, keys: map[string]crypto.PublicKey{},
		budget: rate.NewLimiter(rate.Every(keyRefetchEvery), keyRefetchBurst)}
}

// VerifySignature implements oidc.KeySet. Errors that mean the keys could
// not be had say "fetching keys" (503 for the caller, see VerifyBearer).
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	kid := headerKID(jwt)
	key, err := k.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, fmt.Errorf("failed to verify signature: the issuer publishes no key %q", kid)
	}
	return (&oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key}}).VerifySignature(ctx, jwt)
}

// key returns the published key kid, fetching the set again if kid is not
// in it and the refetch budget allows. nil: no such key.
func (k *keySet) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.keys[kid]; ok {
		return key, nil
	}
	if !k.budget.AllowN(k.now(), 1) {
		return nil, nil
	}
	keys, err := k.fetch(ctx)
	if err != nil {
		if len(k.keys) == 0 {
			return nil, fmt.Errorf("fetching keys: %w", err)
		}
		return nil, nil // the keys held stay; this id is not among them
	}
	k.keys = keys
	return k.keys[kid], nil
}

func (k *keySet) fetch(ctx context.Context) (map[string]crypto.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	keys := map[string]crypto.PublicKey{}
	for _, jwk := range set.Keys {
		if jwk.Use == "" || jwk.Use == "sig" {
			keys[jwk.KeyID] = jwk.Key
		}
	}
	if len(keys) == 0 {
		return nil, errors.New(k.url + ": no signing key")
	}
	return keys, nil
}

// headerKID is the key id in a JWT's protected header ("" when it has none
// or the header does not parse: the signature check then refuses it).
func headerKID(raw string) string {
	head, _, ok := strings.Cut(raw, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		KID string `json:"kid"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.KID
}
