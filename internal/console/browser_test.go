package console_test

// The harness of the end-to-end tests: a whole processor (Postgres, kfake,
// the API and the console) and a real headless Chromium driven over the
// DevTools protocol with chromedp. No part is mocked.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const dlqTopic = "dead_letter_queue"

// policies keep a failure waiting ten minutes for its first retry, so nothing
// is redelivered during a test unless the test asks for it.
const policies = `_default:
  retry: {max_attempts: 5, backoff_strategy: exponential, initial_interval: PT10M, backoff_coefficient: 2.0, max_interval: PT6H, jitter: false}
`

type server struct {
	base    string
	brokers []string
	key     string // for the test's own API calls when the server wants keys
	dbURL   string
}

// startServer runs a processor on a fresh database and an in-process Kafka
// with the source topic orders; env overrides settings ("NAME", "value" pairs).
func startServer(t testing.TB, env ...string) *server {
	t.Helper()
	return startServerWith(t, app.Options{}, env...)
}

// startServerWith is startServer with the processor's options.
func startServerWith(t testing.TB, opts app.Options, env ...string) *server {
	t.Helper()
	brokers := kafkatest.New(t, dlqTopic, "orders", "payments", dlqTopic+".archive", dlqTopic+".events")
	dbURL := pgtest.URL(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "default.yaml"), []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := apptest.Start(t, brokers, dbURL, opts, append([]string{"REDRIVE_POLICIES_DIR", dir}, env...)...)
	return &server{base: "http://" + a.Addr(), brokers: brokers, dbURL: dbURL}
}

// kcat dead-letters value with kcat, as the README's tour does.
func (s *server) kcat(t testing.TB, key, value string, headers ...string) {
	t.Helper()
	args := []string{"-P", "-b", s.brokers[0], "-t", dlqTopic, "-k", key}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	cmd := testdate.Command(t, "kcat", args...)
	cmd.Stdin = strings.NewReader(value + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v: %s", err, out)
	}
}

// api calls the API and decodes its JSON into out.
func (s *server) api(t testing.TB, method, path string, out any) int {
	t.Helper()
	status, body := s.call(t, method, path, "", nil)
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, status, body, err)
		}
	}
	return status
}

// call sends a request to the API, with the server's key if it has one and
// with contentType unless it is empty, and returns the answer's status and
// body.
func (s *server) call(t testing.TB, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// browser is a headless Chromium tab that fails the test on any uncaught
// JavaScript error, console.error, 5xx answer, or write to the API without
// Content-Type: application/json.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	dialogs  []string // the confirmation dialogs accepted, by their message
}

// chromium finds Debian's chromium (or Chrome) on PATH.
func chromium(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console tests need a headless Chromium: apt-get install chromium (.ci/run installs it)")
	return ""
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	)
	// The page's clock (Date) is the tests' (make test-dates moves it), as
	// the server's is; TZ, inherited, is its time zone.
	env, err := testdate.ProcessEnv()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, chromedp.Env(env...))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	if err := chromedp.Listen(ctx, b.watch); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("browser: %s", p)
		}
	})
	return b
}

// watch records what must never happen on a page. The API's 4xx answers are
// not among them: the pages show them, and the tests check that they do.
func (b *browser) watch(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		problem = fmt.Sprintf("uncaught exception: %s at %s:%d", d.Text, d.URL, d.LineNumber)
		if d.Exception != nil {
			problem += " " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			problem = "console.error: " + strings.Join(args, " ")
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.Text, "the server responded with a status of 4") {
			problem = fmt.Sprintf("console (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		}
	case *network.EventResponseReceived:
		if ev.Response.Status >= 500 {
			problem = fmt.Sprintf("%d from %s", ev.Response.Status, ev.Response.URL)
		}
	case *network.EventRequestWillBeSent:
		// The API refuses a write without a JSON content type.
		r := ev.Request
		if r.Method != "GET" && r.Method != "HEAD" && r.Method != "OPTIONS" && strings.Contains(r.URL, "/ojs/") {
			if ct, _ := r.Headers["Content-Type"].(string); ct != "application/json" {
				problem = fmt.Sprintf("%s %s sent Content-Type %q, want application/json", r.Method, r.URL, ct)
			}
		}
	case *cdppage.EventJavascriptDialogOpening:
		// A test clicks Delete to delete: it says yes, and asserts the
		// question. (The answer cannot wait in this listener: it would
		// hold up the events the answer needs.)
		b.mu.Lock()
		b.dialogs = append(b.dialogs, ev.Message)
		b.mu.Unlock()
		go func() {
			if _, err := chromedp.Call(b.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true}); err != nil && b.ctx.Err() == nil {
				b.mu.Lock()
				b.problems = append(b.problems, "accept dialog: "+err.Error())
				b.mu.Unlock()
			}
		}()
	}
	if problem != "" {
		b.mu.Lock()
		b.problems = append(b.problems, problem)
		b.mu.Unlock()
	}
}

// run runs actions with a deadline, failing the test with what it was doing
// and what the page shows.
func (b *browser) run(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		url, _ := chromedp.Run(b.ctx, chromedp.Location())
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		if len(body) > 3000 {
			body = "…" + body[len(body)-3000:]
		}
		t.Fatalf("%s: %v\nat %s, the page says:\n%s", what, err, url, body)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the text of the first element matching the CSS selector sel.
func (b *browser) text(t testing.TB, sel string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel))
}

// count counts the elements matching the CSS selector sel.
func (b *browser) count(t testing.TB, sel string) int {
	t.Helper()
	return eval[int](t, b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// until waits until the JavaScript expression cond is true; what says what
// it waits for.
func until(what, cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			ok, err := chromedp.Evaluate[bool](cond)(ctx, tg)
			if err != nil && !navigating(err) {
				return err
			}
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: never happened", what)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// navigating says err is an evaluation cut short by the page navigating (a
// form submitted, a link followed): the condition is asked again on the
// next page, as a person would look again once it has loaded.
func navigating(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Inspected target navigated or closed") ||
		strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Cannot find context with specified id")
}

// waitText waits until the element matching the CSS selector sel contains want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf("%s containing %q", sel, want),
		fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").includes(%q)`, sel, want))
}

// click clicks the element matching the CSS selector sel, once it is visible.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
}

// screenshot saves the page as a PNG in the screenshot directory:
// $REDRIVE_SCREENSHOTS, or a temporary one (logged).
func (b *browser) screenshot(t testing.TB, name string) {
	t.Helper()
	dir := os.Getenv("REDRIVE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "redrive-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
