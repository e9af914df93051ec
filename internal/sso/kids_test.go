package sso

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/idptest"
)

// The key set fetches the issuer's keys again for an unknown key id only
// within its budget: made-up ids cost the provider a few requests, then one
// per interval; a key rotated in while the budget is spent is learnt once it
// refills, and the keys held keep verifying meanwhile.
func TestKeySetBoundsRefetches(t *testing.T) {
	is := idptest.New(t, "redrive")
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	ks := newKeySet(is.URL+"/keys", http.DefaultClient, func() time.Time { return now })
	ctx := context.Background()
	verify := func(tok string) error { _, err := ks.VerifySignature(ctx, tok); return err }

	if err := verify(is.Token(nil)); err != nil {
		t.Fatalf("a token of the published key: %v", err)
	}
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if verify(idptest.Sign(forger, fmt.Sprintf("made-up-%d", i), map[string]any{"iss": is.URL})) == nil {
			t.Fatal("a token of a made-up key id verified")
		}
	}
	if n := is.Fetches(); n != keyRefetchBurst {
		t.Errorf("50 made-up key ids: %d fetches of the key set, want the budget of %d", n, keyRefetchBurst)
	}

	old := is.Token(nil)
	is.Rotate()
	rotated := is.Token(nil)
	if verify(rotated) == nil {
		t.Error("a token of the rotated key verified with the budget spent (no fetch was allowed)")
	}
	now = now.Add(keyRefetchEvery)
	if err := verify(rotated); err != nil {
		t.Errorf("a token of the rotated key, budget refilled: %v", err)
	}
	if verify(old) == nil {
		t.Error("a token of the retired key still verifies after the set was fetched again")
	}
	if n := is.Fetches(); n != keyRefetchBurst+1 {
		t.Errorf("%d fetches in all, want %d", n, keyRefetchBurst+1)
	}
}
