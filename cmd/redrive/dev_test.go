package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/pgtest"
)

// redrive dev says where its console is, and the README's tour shows what
// it prints: a real run's banner, for its own ports, is the README's for
// the default ones.
func TestDevPrintsTheConsoleURL(t *testing.T) {
	cmd := rootCmd()
	var out, errOut logtest.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"dev", "--http-addr", "127.0.0.1:0", "--kafka-port", "0", "--database-url", pgtest.URL(t),
		"--log-level", "error", "--policies", t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop")
		}
	}()
	ready := regexp.MustCompile(`console  (http://localhost:(\d+)/ui/)\n  API      http://localhost:(\d+)/ojs/v1/dead-letter\n  Kafka    (127\.0\.0\.1:\d+)\n`)
	var m []string
	eventually.Nil(t, "dev to say it is ready", func() error {
		if m = ready.FindStringSubmatch(out.String()); m != nil {
			return nil
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dev ended before it was ready: %v; stdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		default:
		}
		return fmt.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}, eventually.Within(60*time.Second))
	if got, want := out.String(), devBanner("127.0.0.1:"+m[2], []string{m[4]}); got != want {
		t.Errorf("dev printed:\n%s\nwant:\n%s", got, want)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %d %s, want the console", m[1], resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := devBanner(":8080", []string{"127.0.0.1:9092"}); !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show what redrive dev prints:\n%s", want)
	}
}
