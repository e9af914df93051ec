package config

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// tokenServer is an OAuth 2.0 token endpoint of the client-credentials grant
// that issues tok-1, tok-2, … valid for expiresIn seconds, to client
// "redrive" with secret "s3cret" only.
func tokenServer(t *testing.T, expiresIn int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var issued atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
			return
		}
		if !ok {
			id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if id != "redrive" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if got := r.Form.Get("scope"); got != "kafka.read kafka.write" {
			http.Error(w, `{"error":"invalid_scope"}`, http.StatusBadRequest)
			return
		}
		n := issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "bearer", "expires_in": expiresIn})
	}))
	t.Cleanup(srv.Close)
	return srv, &issued
}

// clientFirst is what the mechanism sends the broker first.
func clientFirst(t *testing.T, k KafkaSecurity) (string, error) {
	t.Helper()
	m, err := k.oauthMechanism()
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := m.Authenticate(context.Background(), "broker:9092")
	return string(msg), err
}

func TestOAuthBearerFetchesReusesAndRefreshesItsToken(t *testing.T) {
	t.Parallel()
	srv, issued := tokenServer(t, 3600)
	k := KafkaSecurity{SASLMechanism: mechanismOAuth, OAuthTokenURL: srv.URL, OAuthClientID: "redrive", OAuthClientSecret: "s3cret",
		OAuthScopes: []string{"kafka.read", "kafka.write"}, OAuthExtensions: []string{"logicalCluster=lkc-1", "identityPoolId=pool-2"}}
	m, err := k.oauthMechanism()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // one token for every session until it is about to expire
		_, msg, err := m.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		if s := string(msg); !strings.Contains(s, "auth=Bearer tok-1\x01") || !strings.Contains(s, "logicalCluster=lkc-1\x01") ||
			!strings.Contains(s, "identityPoolId=pool-2\x01") {
			t.Fatalf("client first message %q: want token tok-1 and both extensions", s)
		}
	}
	if n := issued.Load(); n != 1 {
		t.Fatalf("the token endpoint issued %d tokens for three sessions, want 1", n)
	}

	// Tokens that expire within seconds are fetched afresh for each session.
	short, issuedShort := tokenServer(t, 5)
	k.OAuthTokenURL = short.URL
	m, err = k.oauthMechanism()
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		_, msg, err := m.Authenticate(context.Background(), "broker:9092")
		if err != nil || !strings.Contains(string(msg), fmt.Sprintf("auth=Bearer tok-%d\x01", want)) {
			t.Fatalf("session %d: %q, %v; want a fresh token tok-%d", want, msg, err, want)
		}
	}
	if n := issuedShort.Load(); n != 2 {
		t.Fatalf("issued %d short-lived tokens for two sessions, want 2", n)
	}
}

func TestOAuthBearerFailsTheSessionWhenNoTokenComes(t *testing.T) {
	t.Parallel()
	srv, _ := tokenServer(t, 3600)
	k := KafkaSecurity{SASLMechanism: mechanismOAuth, OAuthTokenURL: srv.URL, OAuthClientID: "redrive", OAuthClientSecret: "wrong",
		OAuthScopes: []string{"kafka.read", "kafka.write"}}
	if _, err := clientFirst(t, k); err == nil || !strings.Contains(err.Error(), "OAUTHBEARER") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("a refused client: %v; want an error naming OAUTHBEARER and the token endpoint", err)
	}
}

func TestMSKIAMSignsWithTheDefaultCredentialsAndTheBrokersRegion(t *testing.T) {
	// The AWS SDK's default chain, from the environment only.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "session-token-1")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "")
	m, err := mskMechanism()
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := m.Authenticate(context.Background(), "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var signed map[string]string
	if err := json.Unmarshal(msg, &signed); err != nil {
		t.Fatalf("client first message %q: %v", msg, err)
	}
	if c := signed["x-amz-credential"]; !strings.HasPrefix(c, "AKIDEXAMPLE/") || !strings.HasSuffix(c, "/eu-west-1/kafka-cluster/aws4_request") ||
		signed["x-amz-security-token"] != "session-token-1" || signed["action"] != "kafka-cluster:Connect" || signed["x-amz-signature"] == "" {
		t.Fatalf("signed request %v: want the environment's key, the broker's region and a signature", signed)
	}
}
