//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/testdate"
)

// tourStep is what the test knows of one of the tour's commands: the
// command is the README's one that contains match.
type tourStep struct {
	match string
	// once: run it once (a write, or a command that waits by itself, or
	// one whose output cannot change); otherwise it is a read of what
	// Redrive does in the background, run again until check passes.
	once bool
	// timeout bounds one run (default: 20s).
	timeout time.Duration
	// check says what is wrong with a run's standard output; nil: nothing
	// to check but its exit status.
	check func(tr *tour, out string) error
}

// tourSteps are the tour's commands, in the README's order, with what each
// must print: what the README shows or says it prints.
var tourSteps = []tourStep{
	{match: "| kcat -P -b 127.0.0.1:9092 -t dead_letter_queue -k order-17", once: true},
	{match: "curl -s 'localhost:8080/ojs/v1/dead-letter?queue=orders' | jq", check: func(tr *tour, out string) error {
		var page struct {
			Items []struct{ ID, Key, State string } `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 1 || page.Items[0].Key != "order-17" {
			return fmt.Errorf("want the order record alone, got (%v):\n%s", err, out)
		}
		tr.orderID = page.Items[0].ID
		return nil
	}},
	{match: "kcat -P -b 127.0.0.1:9092 -t dead_letter_queue \\\n  -H __connect.errors.topic=inventory", once: true},
	{match: "?queue=inventory&error_type=org.apache.kafka.connect.errors.DataException' | jq '.items[0].source'",
		check: jsonHas(`{"topic": "inventory", "partition": 0, "offset": 99}`)},
	{match: "echo 'not an envelope' | kcat -P -b 127.0.0.1:9092 -t dead_letter_queue", once: true},
	{match: "?error_type=redrive.unparseable' | jq '.items[0].format'", check: jsonHas(`"unparseable"`)},
	// go run compiles first: the one slow start of the tour (on an empty
	// build cache a minute or two, while the redelivery below comes due).
	{match: "go run ./cmd/redrive policy explain orders ", once: true, timeout: 4 * time.Minute,
		check: printsLines("topic                       orders", "merged                      system defaults ← _default (policies/default.yaml)",
			"retry.initial_interval      PT1M", "  1              2             PT1M   PT1M")},
	{match: "go run ./cmd/redrive policy explain execution-requests --policies policies/examples", once: true, timeout: time.Minute,
		check: printsLines("topic                       execution-requests", "retry.initial_interval      PT30S")},
	{match: "go run ./cmd/redrive policy validate policies", once: true, timeout: time.Minute,
		check: printsLines("policies: 1 file, 0 topic entries: valid")},
	// The first redelivery under the shipped policy: a minute after the
	// failure, times [0.5, 1.5) of jitter. kcat waits for it.
	{match: "kcat -C -b 127.0.0.1:9092 -t orders -c 1", once: true, timeout: 150 * time.Second, check: func(tr *tour, out string) error {
		if want := "order-17 redrive.id=" + tr.orderID + ",redrive.attempt=2,"; !strings.HasPrefix(out, want) {
			return fmt.Errorf("want the redelivery of %s (%q…), got %q", tr.orderID, want, out)
		}
		return nil
	}},
	// The README says so of a record once its redelivery was produced.
	{match: "curl -s localhost:8080/ojs/v1/dead-letter/<id> | jq", check: func(tr *tour, out string) error {
		return jsonHas(`{"id": "`+tr.orderID+`", "state": "completed", "completed_by": "redelivered", "attempt": 2}`)(tr, out)
	}},
	{match: "?state=retryable&since=2026-01-01T00:00:00Z&limit=10' | jq .pagination", check: func(tr *tour, out string) error {
		var p struct {
			Total   *int  `json:"total"`
			Limit   int   `json:"limit"`
			HasMore *bool `json:"has_more"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil || p.Total == nil || p.Limit != 10 || p.HasMore == nil {
			return fmt.Errorf("want a page's pagination (total, limit 10, has_more), got (%v):\n%s", err, out)
		}
		return nil
	}},
	{match: "curl -s localhost:8080/readyz", check: jsonHas(`{"status": "ok", "checks": {"postgres": "ok", "kafka": "ok", "ingest": "ok", "dlq_topics": "ok"}}`)},
	{match: "curl -s localhost:8080/metrics | grep redrive_ingest", check: printsLines(
		`redrive_ingest_records_total{dlq_topic="dead_letter_queue",format="redrive"} 1`,
		`redrive_ingest_records_total{dlq_topic="dead_letter_queue",format="connect"} 1`,
		`redrive_ingest_records_total{dlq_topic="dead_letter_queue",format="unparseable"} 1`)},
}

// The README's five-minute tour, run as written: each command of its sh
// blocks through bash, from the repository root, against a redrive dev of
// this package. The tour's one start command, make run, is not run: the
// test starts redrive dev itself, as make run does, with its ports moved
// through REDRIVE_HTTP_ADDR and REDRIVE_KAFKA_PORT to free ones; so in every
// command 127.0.0.1:9092 and localhost:8080 become those. <id> becomes the
// id of the order record the tour stored (the README says so). Nothing else
// of a command changes. A command that fails fails the test, and so does
// output the README shows (```text and ```json blocks after a command, a
// comment such as # "unparseable") that a run does not print.
//
// It waits for the shipped policy's first redelivery: about a minute.
func TestREADMETour(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "kcat", "jq", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's tour needs %s, which is not on PATH: install it (.ci/run does: apt-get install %s)", tool, tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tourBlocks(t, filepath.Join(root, "README.md"), "A five-minute tour")
	if len(blocks) == 0 || blocks[0].lang != "sh" || strings.TrimSpace(blocks[0].text) != "make run" {
		t.Fatalf("the tour's first block is %+v; the test starts redrive dev in place of a block of just `make run`", blocks[0])
	}
	httpPort, kafkaPort := freePort(t), freePort(t)
	tr := &tour{root: root, env: tourEnv(t), used: make([]bool, len(tourSteps)),
		moved: strings.NewReplacer("127.0.0.1:9092", "127.0.0.1:"+kafkaPort, "localhost:8080", "localhost:"+httpPort)}
	banner := startTourDev(t, root, tr.env, httpPort, kafkaPort)

	last := &ran{cmd: "make run", out: banner} // the test's start, for the README's make run
	for _, b := range blocks[1:] {
		switch b.lang {
		case "sh":
			for _, cmd := range commands(b.text) {
				last = tr.run(t, cmd)
			}
		case "text", "json":
			if last == nil {
				t.Fatalf("the README shows output no command printed:\n%s", b.text)
			}
			check := textCovers
			if b.lang == "json" {
				check = jsonCovers
			}
			if err := check(last.out, tr.moved.Replace(b.text)); err != nil {
				t.Fatalf("README: %s\nprints what the README does not show: %v", last.cmd, err)
			}
			last = nil
		default: // go, yaml: code to read, not commands
		}
	}
	for i, used := range tr.used {
		if !used {
			t.Errorf("the tour has no command containing %q, which this test runs", tourSteps[i].match)
		}
	}
}

// tour is a run of the README's tour.
type tour struct {
	root    string
	env     []string
	moved   *strings.Replacer // the README's addresses to the test's
	orderID string            // the order record's id, for <id>
	used    []bool            // which tourSteps ran
}

// ran is a command the tour ran and its standard output.
type ran struct{ cmd, out string }

// run runs the README's command written (as its step says) and returns what
// it printed.
func (tr *tour) run(t *testing.T, written string) *ran {
	t.Helper()
	st := tr.step(t, written)
	cmd := tr.moved.Replace(written)
	if strings.Contains(cmd, "<id>") {
		if tr.orderID == "" {
			t.Fatalf("README: %s\nuses <id> before the tour listed the order record", written)
		}
		cmd = strings.ReplaceAll(cmd, "<id>", tr.orderID)
	}
	if p := regexp.MustCompile(`\b(9092|8080)\b`).FindString(cmd); p != "" {
		t.Fatalf("README: %s\nnames port %s other than as 127.0.0.1:9092 or localhost:8080, which the test moves", written, p)
	}
	timeout := st.timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	check := func(out string) error {
		if st.check != nil {
			if err := st.check(tr, out); err != nil {
				return err
			}
		}
		if shown, ok := shownOutput(trailingComment(written)); ok && strings.TrimSpace(out) != shown {
			return fmt.Errorf("the README's comment shows %s, it printed %q", shown, out)
		}
		return nil
	}
	start := testdate.Now()
	defer func() { t.Logf("%6.1fs  %s", testdate.Since(start).Seconds(), strings.SplitN(written, "\n", 2)[0]) }()
	var out string
	attempt := func() error {
		var err error
		if out, err = tr.bash(cmd, timeout); err != nil {
			return err
		}
		return check(out)
	}
	if st.once {
		if err := attempt(); err != nil {
			t.Fatalf("README: %s\n%v", written, err)
		}
	} else {
		eventually.Nil(t, "README: "+written, attempt)
	}
	return &ran{cmd: written, out: out}
}

// step finds the one step of cmd.
func (tr *tour) step(t *testing.T, cmd string) tourStep {
	t.Helper()
	found := -1
	for i, st := range tourSteps {
		if strings.Contains(cmd, st.match) {
			if found >= 0 {
				t.Fatalf("README: %s\nmatches two of the test's steps: %q and %q", cmd, tourSteps[found].match, st.match)
			}
			found = i
		}
	}
	if found < 0 {
		t.Fatalf("README: %s\nis a tour command the test does not know: add a step saying what it prints", cmd)
	}
	if tr.used[found] {
		t.Fatalf("README: %s\nis the tour's second command matching %q", cmd, tourSteps[found].match)
	}
	tr.used[found] = true
	return tourSteps[found]
}

// bash runs cmd as bash -o pipefail -c cmd from the repository root, and
// returns its standard output; an error says how it failed, with its
// standard error.
func (tr *tour) bash(cmd string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	c.Dir, c.Env = tr.root, tr.env
	// The pipeline's commands are bash's children: stop them all.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("still running after %v; it printed %q, on stderr %q", timeout, stdout.String(), stderr.String())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%v; it printed %q, on stderr %q", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// jsonHas checks that a command printed JSON with what want shows (as the
// README's JSON blocks do: jsonCovers).
func jsonHas(want string) func(*tour, string) error {
	return func(_ *tour, out string) error { return jsonCovers(out, want) }
}

// printsLines checks that a command printed each of lines, as a whole line.
func printsLines(lines ...string) func(*tour, string) error {
	return func(_ *tour, out string) error {
		for _, l := range lines {
			if !strings.Contains("\n"+out+"\n", "\n"+l+"\n") {
				return fmt.Errorf("want a line %q, got:\n%s", l, out)
			}
		}
		return nil
	}
}

// tourEnv is the test's environment without Redrive's settings (a
// developer's shell may hold some): the tour's commands and its redrive dev
// see the defaults, as a newcomer's would. They run on the tests' clock
// (testdate: kcat stamps what it writes).
func tourEnv(t *testing.T) []string {
	env, err := testdate.ProcessEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDRIVE_") && !strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, testdate.Env) {
			env = append(env, kv)
		}
	}
	return env
}

// freePort is a port nothing listens on just now, on 127.0.0.1.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// startTourDev starts redrive dev (this test binary as redrive) in root with
// its ports moved to httpPort and kafkaPort through the environment, on a
// database of its own, and returns its banner once it printed one. At the
// end of the test it is interrupted, as Ctrl-C would, and must exit 0.
func startTourDev(t *testing.T, root string, env []string, httpPort, kafkaPort string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.URL(t) // dropped at the end, after dev stopped (cleanups run last first)
	cmd := exec.Command(exe, "dev")
	cmd.Dir = root
	cmd.Env = append(env, runMainEnv+"=1", "REDRIVE_HTTP_ADDR=127.0.0.1:"+httpPort, "REDRIVE_KAFKA_PORT="+kafkaPort, "DATABASE_URL="+dbURL)
	var stdout, stderr logtest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("redrive dev, interrupted, exited with %v, not 0", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("redrive dev did not stop within 30s of an interrupt")
		}
		if t.Failed() {
			t.Logf("redrive dev's stderr:\n%s", stderr.String())
		}
	})
	ready := regexp.MustCompile(`export REDRIVE_API_URL=\S+\n`)
	eventually.Nil(t, "redrive dev to print its banner", func() error {
		if ready.MatchString(stdout.String()) {
			return nil
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("redrive dev ended before it was ready: %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		default:
		}
		return errors.New("stdout so far: " + stdout.String())
	}, eventually.Within(60*time.Second))
	return stdout.String()
}
