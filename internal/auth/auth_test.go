package auth_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/auth"
)

func TestAuthenticateMatchesOnlyTheRightKey(t *testing.T) {
	secret, digest, err := auth.Generate()
	if err != nil || !strings.HasPrefix(secret, "rdk_") || digest != auth.Digest(secret) {
		t.Fatalf("Generate = %q %q %v", secret, digest, err)
	}
	ks, err := auth.NewKeys(auth.Key{Name: "ro", Scope: auth.ScopeRead, SHA256: auth.Digest("r")},
		auth.Key{Name: "rw", Scope: auth.ScopeWrite, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := ks.Authenticate(secret); !ok || k.Name != "rw" || !k.Scope.Allows(auth.ScopeWrite) {
		t.Errorf("write key = %+v %v", k, ok)
	}
	if k, ok := ks.Authenticate("r"); !ok || k.Name != "ro" || k.Scope.Allows(auth.ScopeWrite) || !k.Scope.Allows(auth.ScopeRead) {
		t.Errorf("read key = %+v %v", k, ok)
	}
	for _, bad := range []string{"", "R", secret + "x", digest} {
		if _, ok := ks.Authenticate(bad); ok {
			t.Errorf("%q authenticated", bad)
		}
	}
	var none *auth.Keys
	if _, ok := none.Authenticate(secret); ok {
		t.Error("nil Keys authenticated")
	}
}

func TestParseNamesEveryProblem(t *testing.T) {
	good := strings.Repeat("ab", 32)
	cases := map[string]string{
		"keys:\n  - {name: a, scope: admin, sha256: " + good + "}\n":                                                  "keys[0].scope",
		"keys:\n  - {name: a, scope: read, sha256: xyz}\n":                                                            "keys[0].sha256",
		"keys:\n  - {scope: read, sha256: " + good + "}\n":                                                            "keys[0].name",
		"keys:\n  - {name: a, scope: read, sha256: " + good + "}\n  - {name: a, scope: read, sha256: " + good + "}\n": "keys[1].name",
		"keys:\n  - {name: a, scope: read, sha256: " + good + ", key: plain}\n":                                       "key",
		"nope: 1\n": "nope",
	}
	if ks, err := auth.Parse([]byte("keys: []\n")); err != nil || ks.Len() != 0 {
		t.Errorf("an empty key list: %v", err)
	}
	for in, want := range cases {
		if _, err := auth.Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", in, err, want)
		}
	}
}
