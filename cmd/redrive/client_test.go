package main

import (
	"net"
	"strings"
	"testing"
)

// refusedURL is the URL of a port nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	return url
}

// An admin command that reaches no server says which URL it tried, where
// that URL came from, and how to point it elsewhere.
func TestCLISaysWhereItLookedForTheAPI(t *testing.T) {
	url := refusedURL(t)
	_, _, err := run(t, "", "dlq", "list", "--api-url", url)
	for _, want := range []string{"GET /ojs/v1/dead-letter", "no Redrive API answers at " + url + " (--api-url)", "connection refused",
		"Is Redrive running there? Set REDRIVE_API_URL or --api-url to its URL (redrive dev prints the line to export)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("dlq list against %s: %v; want an error saying %q", url, err, want)
		}
	}

	t.Setenv("REDRIVE_API_URL", url)
	_, _, err = run(t, "", "dlq", "stats")
	if err == nil || !strings.Contains(err.Error(), "no Redrive API answers at "+url+" (REDRIVE_API_URL)") {
		t.Errorf("dlq stats with REDRIVE_API_URL=%s: %v; want an error naming it", url, err)
	}
}

// A URL without a scheme (localhost:8080) is refused before anything is
// sent, naming the setting it came from.
func TestCLIRefusesAnAPIURLThatIsNotOne(t *testing.T) {
	_, _, err := run(t, "", "dlq", "list", "--api-url", "localhost:18765")
	want := `--api-url: want the API's http(s) URL, such as http://localhost:8080, got "localhost:18765"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--api-url localhost:18765: %v; want %s", err, want)
	}
	t.Setenv("REDRIVE_API_URL", "redrive:8080")
	_, _, err = run(t, "", "tasks", "list")
	if err == nil || !strings.Contains(err.Error(), `REDRIVE_API_URL: want the API's http(s) URL`) {
		t.Errorf("REDRIVE_API_URL=redrive:8080: %v; want an error naming REDRIVE_API_URL", err)
	}
}
