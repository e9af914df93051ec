package template

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Normalized messages, as the miner gets them.
		{`context deadline exceeded after <duration> calling inventory-<n>f<n>c<n> (<ip>:<port>)`,
			`context|deadline|exceeded|after|<duration>|calling|inventory-<pod>|<ip>:<port>`},
		{`ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)`,
			`ERROR|duplicate|key|value|violates|unique|constraint|"orders_pkey"|SQLSTATE|23505`},
		{`Get "https://<host>/v<n>/orders/<n>": context deadline exceeded`,
			`Get|"https://<host>/v<n>/orders/<n>"|context|deadline|exceeded`},
		{`HTTPSConnectionPool(host='api.stripe.com', port=<n>): Read timed out. (read timeout=<n>)`,
			`HTTPSConnectionPool|host=|'api.stripe.com'|port=|<n>|Read|timed|out|read|timeout=|<n>`},
		{`rpc error: code = Unavailable desc = "transport: dial tcp <ip>:<port>: connect: connection refused"`,
			`rpc|error|code|=|Unavailable|desc|=|transport|dial|tcp|<ip>:<port>|connect|connection|refused`},
		{"RESPONSE 404: 404 The blob\n-------------------------\nERROR CODE: BlobNotFound",
			`RESPONSE|404|404|The|blob|ERROR|CODE|BlobNotFound`},
		{`Unexpected token < in JSON at position <n>`, `Unexpected|token|<|in|JSON|at|position|<n>`},
		{`READONLY You can't write against a read only replica.`, `READONLY|You|can't|write|against|a|read|only|replica`},
		{`capture charge ch_<n>NqwAQMW<n>WWEWFFOevlJUDJH: request req_EtdTfodORmyyrx`,
			`capture|charge|ch_<id>|request|req_<id>`},
		{``, ``},
		{`  ...  `, ``},
	} {
		got := strings.Join(Tokenize(tc.in), "|")
		if got != tc.want {
			t.Errorf("Tokenize(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// The issue's two families: every variant tokenizes alike after Normalize.
func TestTokenizeIssueFamilies(t *testing.T) {
	for _, family := range [][]string{{
		`context deadline exceeded after 30s calling inventory-7f9c4 (10.2.3.44:8443)`,
		`context deadline exceeded after 30s calling inventory-bxkqz (10.2.3.45:8443)`,
		`context deadline exceeded after 30s calling inventory-x2k9p (10.2.7.1:8443)`,
		`context deadline exceeded after 30s calling inventory-94bcd (10.2.3.44:8443)`,
		`context deadline exceeded after 30s calling inventory-7f9c4b8d6-x2k9p (10.2.3.44:8443)`,
		`context deadline exceeded after 30s calling inventory-5d4f8b7c9x-bxkqz (10.2.3.44:8443)`,
	}, {
		`stripe 503 for ch_3NqwAQMW2WWEWFFOevlJUDJH (request req_EtdTfodORmyyrx)`,
		`stripe 503 for ch_1MowQVLkdIwHu7ixeRlqHVzs (request req_NffrFeUfNV2Hib)`,
		`stripe 503 for ch_3PqRsTuVwXyZaBcDeFgHiJkL (request req_8zQmLpV2xWcRtY)`,
	}} {
		want := strings.Join(Tokenize(fingerprint.Normalize(family[0])), " ")
		for _, msg := range family[1:] {
			if got := strings.Join(Tokenize(fingerprint.Normalize(msg)), " "); got != want {
				t.Errorf("%q\n tokens %s\n   want %s", msg, got, want)
			}
		}
	}
}

func TestTokenizeIsBounded(t *testing.T) {
	long := strings.Repeat("word ", 10000)
	if n := len(Tokenize(long)); n != MaxTokensLimit {
		t.Errorf("%d tokens, want %d", n, MaxTokensLimit)
	}
	huge := strings.Repeat("x", 100000)
	toks := Tokenize(huge)
	if len(toks) != 1 || len(toks[0]) != maxTokenizeBytes {
		t.Errorf("one huge word: %d tokens of %d bytes, want 1 of %d", len(toks), len(toks[0]), maxTokenizeBytes)
	}
}
