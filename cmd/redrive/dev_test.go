package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	ready := regexp.MustCompile(`console  (http://localhost:(\d+)/ui/)\n  API      http://localhost:(\d+)/ojs/v1/dead-letter\n  Kafka    (127\.0\.0\.1:\d+)\n` +
		`.*\n  export REDRIVE_API_URL=http://localhost:\d+\n`)
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

// The URL dev prints for its API: localhost for a wildcard or loopback
// address (a browser and the CLI on this machine reach it so), else the
// host it listens on.
func TestDevBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":            "http://localhost:8080",
		"127.0.0.1:18765":  "http://localhost:18765",
		"0.0.0.0:8080":     "http://localhost:8080",
		"[::]:8080":        "http://localhost:8080",
		"[::1]:8080":       "http://localhost:8080",
		"localhost:9000":   "http://localhost:9000",
		"192.168.1.5:8080": "http://192.168.1.5:8080",
		"[fd00::5]:8080":   "http://[fd00::5]:8080",
		"redrive.lan:8080": "http://redrive.lan:8080",
	} {
		if got := devBaseURL(addr); got != want {
			t.Errorf("devBaseURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// dev's help lists --kafka-port and not the Kafka connection flags of serve,
// which do not apply to it: given, they are refused with the reason; a bad
// REDRIVE_KAFKA_PORT is refused naming it. All before anything starts.
func TestDevRefusesWhatDoesNotApply(t *testing.T) {
	cmd := rootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"dev", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"--kafka-port string", "REDRIVE_KAFKA_PORT", "--http-addr", "--kafka-brokers, the Kafka TLS and SASL flags) do not apply"} {
		if !strings.Contains(help, want) {
			t.Errorf("dev --help lacks %q:\n%s", want, help)
		}
	}
	for _, hidden := range []string{"--kafka-brokers string", "--kafka-tls ", "--kafka-sasl-mechanism", "--kafka-oauth-token-url"} {
		if strings.Contains(help, hidden) {
			t.Errorf("dev --help lists %q, which does not apply to dev:\n%s", hidden, help)
		}
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--kafka-brokers", "kafka:9092"}, nil, "--kafka-brokers does not apply to redrive dev: it runs its own Kafka on 127.0.0.1 (--kafka-port or REDRIVE_KAFKA_PORT moves it); to process a Kafka of yours, run redrive serve"},
		{[]string{"--kafka-tls"}, nil, "--kafka-tls does not apply to redrive dev"},
		{[]string{"--kafka-port", "90000"}, nil, `--kafka-port: "90000" is not a port (want a whole number from 0 to 65535; 0: any free port)`},
		{nil, map[string]string{"REDRIVE_KAFKA_PORT": "kafka"}, `REDRIVE_KAFKA_PORT: "kafka" is not a port`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := rootCmd()
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"dev"}, tc.args...))
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("dev %v %v: %v; want an error saying %s", tc.args, tc.env, err, tc.want)
			}
		})
	}
}
