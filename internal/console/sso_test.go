package console_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/idptest"
)

// A person logs in through the identity provider (authorization code with
// PKCE, in the browser), lands on the page they asked for, and sees only
// the queues their group's role reaches, with the actions the role does
// not grant disabled and saying why. Logging out ends the session.
func TestSingleSignOnShowsOnlyPermittedQueues(t *testing.T) {
	t.Parallel()
	is := idptest.New(t, "redrive-console")
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.yaml")
	if err := os.WriteFile(roles, []byte(`roles:
  payments-operator: {actions: [read, retry, purge], queues: ["payments.*"]}
  admin: {actions: [admin], queues: ["*"]}
members:
  - {group: payments, roles: [payments-operator]}
  - {group: sre, roles: [admin]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The redirect URL names the server's address: choose its port first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := startServer(t, "REDRIVE_AUTH_DISABLED", "false", "REDRIVE_HTTP_ADDR", addr,
		"REDRIVE_OIDC_ISSUER", is.URL, "REDRIVE_OIDC_CLIENT_ID", "redrive-console",
		"REDRIVE_OIDC_REDIRECT_URL", "http://"+addr+"/auth/callback", "REDRIVE_ROLES_FILE", roles)
	// The test's own calls: an admin's token.
	s.key = is.UserToken(idptest.User{Subject: "u-root", Groups: []string{"sre"}})
	s.kcat(t, "pay-17", `{"payment_id":17}`, "redrive.source.topic=payments.card", "redrive.error.type=card.declined",
		"redrive.error.message=issuer declined the card")
	s.kcat(t, "order-99", `{"order_id":99}`, "redrive.source.topic=orders", "redrive.error.type=db.connection_refused",
		"redrive.error.message=dial tcp 10.0.0.5:5432: connection refused")
	s.waitTotal(t, "", 2)
	var page struct{ Items []struct{ ID string } }
	s.api(t, "GET", "/ojs/v1/dead-letter?queue=payments.card", &page)
	payID := page.Items[0].ID

	is.SetUser(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments", "staff"}})
	b := newBrowser(t)
	b.run(t, "the login prompt",
		chromedp.Navigate(s.base+"/ui/records"), chromedp.WaitVisible(chromedp.CSS("#sso-login")))
	if n := b.count(t, "#key"); n != 1 {
		t.Errorf("the login prompt offers no API key field beside single sign-on")
	}
	b.screenshot(t, "sso-login-prompt")
	b.run(t, "log in through the identity provider",
		click("#sso-login"),
		waitText("h1", "Records"), waitText("table.records", "pay-17"),
		waitText("#who", "ann@example.com (payments-operator)"),
		waitText("#readonly", "payments.*"))
	if !eval[bool](t, b, `document.querySelector('header nav a[href="/ui/audit"]').hidden`) {
		t.Error("the Audit link is offered to a person who is no admin")
	}
	if is.Logins != 1 {
		t.Errorf("the provider saw %d logins, want 1", is.Logins)
	}
	if got := eval[string](t, b, `location.pathname`); got != "/ui/records" {
		t.Errorf("after the login the console shows %s, want the page asked for", got)
	}
	if eval[bool](t, b, `document.querySelector("table.records").textContent.includes("order-99")`) {
		t.Error("ann sees a record of orders")
	}
	// Bulk retry and purge are offered (the role grants them on its
	// queues); a repair with a patch (edit) is not.
	if eval[bool](t, b, `document.querySelector("#bulk-retry").disabled`) || !eval[bool](t, b, `document.querySelector("#bulk-patch").disabled`) {
		t.Error("the bulk actions do not follow ann's role (retry and purge, no edit)")
	}
	if eval[bool](t, b, `document.cookie.includes("redrive_session")`) {
		t.Error("the session cookie is readable from JavaScript")
	}
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		b.screenshot(t, "sso-records-"+strconv.FormatInt(w, 10))
	}
	b.run(t, "the window's size back", chromedp.EmulateViewport(1280, 860))

	b.run(t, "the overview", chromedp.Navigate(s.base+"/ui/"), waitText("main", "payments.card"))
	if n := b.count(t, `a[href="/ui/queues/orders"]`); n != 0 {
		t.Errorf("the overview links queue orders %d times for ann", n)
	}

	// The record page offers retry and delete (the role grants them) but
	// not retry with edit, saying why.
	b.run(t, "the record page", chromedp.Navigate(s.base+"/ui/records/"+payID), waitText("h1", "Record pay-17"))
	if eval[bool](t, b, `document.querySelector("#retry-now").disabled || document.querySelector("#delete").disabled`) {
		t.Error("retry or delete is disabled for a role that grants them")
	}
	title := eval[string](t, b, `(() => { const e = document.querySelector("#retry-edit"); return e.disabled ? e.title : ""; })()`)
	if title != "Your roles (payments-operator) do not allow edit on payments.card." {
		t.Errorf("retry with edit: disabled with title %q", title)
	}
	b.screenshot(t, "sso-record")

	b.run(t, "log out", waitText("#signout", "Log out"), click("#signout"), chromedp.WaitVisible(chromedp.CSS("#sso-login")))
	// The session is over: a new visit asks again.
	b.run(t, "a visit after logging out", chromedp.Navigate(s.base+"/ui/records"), chromedp.WaitVisible(chromedp.CSS("#sso-login")))
	if n := b.count(t, "table.records"); n != 0 {
		t.Error("after logging out the records are still shown")
	}
}
