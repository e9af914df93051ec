package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/auth"
)

// With API keys on, the console asks for a key and keeps it in the tab; a
// refused key sends the user back to the prompt, and a read key sees every
// page with the write actions disabled, saying why.
func TestAReadKeySeesWriteActionsDisabled(t *testing.T) {
	t.Parallel()
	readKey, readDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	writeKey, writeDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	body := fmt.Sprintf("keys:\n  - {name: ops-read, scope: read, sha256: %s}\n  - {name: ops, scope: write, sha256: %s}\n", readDigest, writeDigest)
	if err := os.WriteFile(keys, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "REDRIVE_AUTH_DISABLED", "false", "REDRIVE_API_KEYS_FILE", keys)
	s.key = readKey
	s.kcat(t, "order-17", `{"order_id":17}`, "redrive.source.topic=orders", "redrive.error.type=db.connection_refused",
		"redrive.error.message=dial tcp 10.0.0.5:5432: connection refused")
	s.waitTotal(t, "queue=orders", 1)
	var page struct{ Items []struct{ ID string } }
	s.api(t, "GET", "/ojs/v1/dead-letter?queue=orders", &page)
	id := page.Items[0].ID

	b := newBrowser(t)
	b.run(t, "the key prompt",
		chromedp.Navigate(s.base+"/ui/records"), chromedp.WaitVisible(chromedp.CSS("#key")),
		setValue("#key", "not-a-key"), click("#key-form button"),
		waitText("main", "That key was refused"))
	b.run(t, "a read key",
		setValue("#key", readKey), click("#key-form button"),
		waitText("h1", "Records"), waitText("table.records", "order-17"),
		waitText("#readonly", `Read-only key "ops-read"`), waitText("#who", "key: ops-read (read)"))
	if got := eval[string](t, b, `location.pathname`); got != "/ui/records" {
		t.Errorf("after the prompt the console shows %s, want the page asked for", got)
	}
	disabled := func(sel string) {
		t.Helper()
		ok := eval[bool](t, b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.disabled && e.title.includes("Read-only key"); })()`, sel))
		if !ok {
			t.Errorf("%s is not disabled with the read-only reason", sel)
		}
	}
	disabled("#bulk-retry")
	disabled("#bulk-purge")
	b.run(t, "the record page", chromedp.Navigate(s.base+"/ui/records/"+id), waitText("h1", "Record order-17"))
	for _, sel := range []string{"#retry-now", "#retry-edit", "#delete"} {
		disabled(sel)
	}
	b.screenshot(t, "read-key")
	b.run(t, "the queue page", chromedp.Navigate(s.base+"/ui/queues/orders"), waitText("#queue-state", "active"))
	for _, sel := range []string{"#queue-pause", "#queue-drain", "#config-save"} {
		disabled(sel)
	}
	if n := b.count(t, "#rule-form"); n != 0 {
		t.Errorf("a read key is offered the replay rule form")
	}

	// A key the server stops accepting (here: replaced in the tab) is sent
	// back to the prompt by the next call's 401.
	b.run(t, "a refused key mid-session",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`sessionStorage.setItem("redrive.key", "revoked"), true`)(ctx, tg)
			return err
		}),
		chromedp.Navigate(s.base+"/ui/tasks"), waitText("main", "That key was refused"), chromedp.WaitVisible(chromedp.CSS("#key")))
	b.run(t, "a write key",
		setValue("#key", writeKey), click("#key-form button"),
		waitText("h1", "Tasks"), waitText("#who", "key: ops (write)"))
	if !eval[bool](t, b, `document.getElementById("readonly").hidden`) {
		t.Errorf("the read-only notice stays for a write key")
	}
	b.run(t, "the record page with a write key", chromedp.Navigate(s.base+"/ui/records/"+id), waitText("h1", "Record order-17"))
	if eval[bool](t, b, `document.querySelector("#retry-now").disabled`) {
		t.Errorf("Retry now is disabled for a write key")
	}
	b.run(t, "forget the key", click("#signout"), chromedp.WaitVisible(chromedp.CSS("#key")))
	if got := eval[string](t, b, `sessionStorage.getItem("redrive.key") || ""`); got != "" {
		t.Errorf("after Forget key the tab still holds %q", got)
	}
}
