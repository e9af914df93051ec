package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
)

// The console shows only what the API answers: with masking rules, a read
// key sees a masked field as *** on every page that shows the record (the
// list, the record's tree, its raw view, its headers), and nowhere in the
// page's DOM is the masked value; a write key sees it in clear.
func TestAMaskedFieldShowsMasked(t *testing.T) {
	t.Parallel()
	readKey, readDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	writeKey, writeDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(keys, []byte(fmt.Sprintf("keys:\n  - {name: support, scope: read, sha256: %s}\n  - {name: ops, scope: write, sha256: %s}\n",
		readDigest, writeDigest)), 0o600); err != nil {
		t.Fatal(err)
	}
	pols := filepath.Join(dir, "policies")
	if err := os.Mkdir(pols, 0o755); err != nil {
		t.Fatal(err)
	}
	masking := policies + "  masking:\n    paths: [card.number]\n    headers: [\"x-customer-*\"]\n    patterns: [email]\n"
	if err := os.WriteFile(filepath.Join(pols, "default.yaml"), []byte(masking), 0o600); err != nil {
		t.Fatal(err)
	}
	brokers := kafkatest.New(t, dlqTopic, "orders", dlqTopic+".archive", dlqTopic+".events")
	a, _ := apptest.Start(t, brokers, pgtest.URL(t), app.Options{},
		"REDRIVE_POLICIES_DIR", pols, "REDRIVE_AUTH_DISABLED", "false", "REDRIVE_API_KEYS_FILE", keys)
	s := &server{base: "http://" + a.Addr(), brokers: brokers, key: writeKey}
	const (
		card  = "4111111111111111"
		email = "ann@example.com"
	)
	s.kcat(t, "pay-1", `{"order_id":9007199254740993,"card":{"number":"`+card+`","brand":"visa"},"customer":"`+email+`"}`,
		"redrive.source.topic=orders", "redrive.error.type=card.declined", "redrive.error.message=declined for "+email,
		"x-customer-email="+email)
	s.waitTotal(t, "queue=orders", 1)
	var page struct{ Items []struct{ ID string } }
	s.api(t, "GET", "/ojs/v1/dead-letter?queue=orders", &page)
	id := page.Items[0].ID

	b := newBrowser(t)
	leaks := func(what string) {
		t.Helper()
		html := eval[string](t, b, `document.documentElement.outerHTML`)
		for _, secret := range []string{card, email} {
			if strings.Contains(html, secret) {
				t.Errorf("%s: the page holds %s", what, secret)
			}
		}
	}
	b.run(t, "the read key", chromedp.Navigate(s.base+"/ui/records"), chromedp.WaitVisible(chromedp.CSS("#key")),
		setValue("#key", readKey), click("#key-form button"), waitText("table.records", "pay-1"))
	leaks("the list")
	b.screenshots(t, "masked-list")
	b.run(t, "the record page", chromedp.Navigate(s.base+"/ui/records/"+id),
		waitText("h1", "Record pay-1"), waitText("#value-tree", `"number"`), waitText("#errors", "declined for"))
	if got := b.text(t, "#value-tree"); !strings.Contains(got, `"***"`) || !strings.Contains(got, "9007199254740993") || !strings.Contains(got, `"visa"`) {
		t.Errorf("the tree shows %q, want the card number and the email as \"***\", the rest as it is", got)
	}
	if got := b.text(t, "#record-masked"); !strings.Contains(got, "this key may not unmask queue orders") {
		t.Errorf("the facts say %q, want why fields show as ***", got)
	}
	if got := b.text(t, "#headers"); !strings.Contains(got, "***") {
		t.Errorf("headers: %q, want x-customer-email as ***", got)
	}
	if got := b.text(t, "#errors"); !strings.Contains(got, "declined for ***") {
		t.Errorf("errors: %q, want the email masked", got)
	}
	leaks("the record page")
	b.screenshots(t, "masked-record")
	b.run(t, "the raw view", click("#value-as-raw"), chromedp.WaitVisible(chromedp.CSS("#value-raw")))
	if got := b.text(t, "#value-raw"); got != `{"order_id":9007199254740993,"card":{"number":"***","brand":"visa"},"customer":"***"}` {
		t.Errorf("Raw shows %s", got)
	}
	leaks("the raw view")

	// The write key may unmask: the same page shows the card number.
	eval[bool](t, b, `sessionStorage.setItem("redrive.key", `+fmt.Sprintf("%q", writeKey)+`), true`)
	b.run(t, "the write key", chromedp.Navigate(s.base+"/ui/records/"+id), waitText("#value-tree", card))
	if n := b.count(t, "#record-masked"); n != 0 {
		t.Errorf("a key that may unmask is told the record is masked")
	}
	b.screenshot(t, "unmasked-record")
}
