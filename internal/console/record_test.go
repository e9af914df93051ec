package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// exactValue is JSON that JavaScript numbers cannot hold and JSON.parse
// would change: 64-bit ids, long decimals and a decimal's trailing zero,
// numbers past a double's range, -0, escapes (é, a surrogate pair), the same
// characters unescaped, a repeated key, and spacing of its own. One line:
// kcat sends a line per record.
const exactValue = `{"zeta":1,"id":9007199254740993,"amount":10.10,` +
	`"ids":[18446744073709551615,-9223372036854775809,12345678901234567890123],` +
	`"pi":3.14159265358979323846264338327950288,"big":1e400,"tiny":-2.5E-400,"neg":-0,"zero":0.000,` +
	`"name":"caf\u00e9","emoji":"\ud83d\ude00","plain":"café 😀","tab":"a\tb\/c",` +
	`"dup":"first","dup":"second",  "spaced" : [ 1 , 2.50 ] ,"nested":{"id":9007199254740993,"ok":true,"none":null}}`

// The record page shows a value exactly as the producer wrote it, and Retry
// with edit changes only what the operator changes: the tree and the editor
// hold every number and string as written (no JavaScript number anywhere on
// the way), and the record produced to the topic carries the original's
// bytes with only the edited field's bytes changed. The error's details are
// shown with their numbers as written too.
func TestRetryWithEditChangesOnlyTheEditedBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.kcat(t, "exact-1", exactValue, "redrive.source.topic=orders", "redrive.error.type=db.timeout",
		"redrive.error.message=timed out", `redrive.error.details={"order_id":9007199254740993,"ratio":0.30000000000000004,"price":10.10}`,
		`x-json={"n":9007199254740993}`)
	// (The harness's recordID reads the record into float64s, which cannot
	// hold 1e400: only the id is read here.)
	var list struct{ Items []struct{ ID string } }
	eventually.True(t, "exact-1 is stored", func() bool {
		s.api(t, "GET", "/ojs/v1/dead-letter?key=exact-1", &list)
		return len(list.Items) == 1
	}, eventually.Within(30*time.Second))
	id := list.Items[0].ID

	b := newBrowser(t)
	b.run(t, "the record page", chromedp.Navigate(s.base+"/ui/records/"+id),
		waitText("h1", "Record exact-1"), waitText("#value-tree", `"zeta"`), waitText("#errors", "timed out"))
	b.screenshots(t, "record-exact")

	// The tree: every number and string token as written, both "dup"s.
	tokens := func(sel string) []string {
		return eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll(%q)].map((e) => e.textContent)`, sel))
	}
	numbers := strings.Join(tokens("#value-tree .json-number"), " ")
	if want := "1 9007199254740993 10.10 18446744073709551615 -9223372036854775809 12345678901234567890123 " +
		"3.14159265358979323846264338327950288 1e400 -2.5E-400 -0 0.000 1 2.50 9007199254740993"; numbers != want {
		t.Errorf("the tree's numbers:\n%s\nwant\n%s", numbers, want)
	}
	strs := strings.Join(tokens("#value-tree .json-string"), " ")
	if want := `"caf\u00e9" "\ud83d\ude00" "café 😀" "a\tb\/c" "first" "second"`; strs != want {
		t.Errorf("the tree's strings:\n%s\nwant\n%s", strs, want)
	}
	if keys := strings.Count(strings.Join(tokens("#value-tree .json-key"), " "), `"dup"`); keys != 2 {
		t.Errorf(`the tree shows "dup" %d times, want both`, keys)
	}
	// Raw is the value as stored.
	b.run(t, "the raw view", click("#value-as-raw"), chromedp.WaitVisible(chromedp.CSS("#value-raw")))
	if got := b.text(t, "#value-raw"); got != exactValue {
		t.Errorf("Raw shows\n%s\nwant\n%s", got, exactValue)
	}
	// The error's details, and a header holding JSON, keep their digits.
	for _, want := range []string{"9007199254740993", "0.30000000000000004", "10.10"} {
		if got := strings.Join(tokens("#errors .json-number"), " "); !strings.Contains(got, want) {
			t.Errorf("the error's details show the numbers %q, want %s among them", got, want)
		}
	}
	if got := b.text(t, "#headers"); !strings.Contains(got, `{"n":9007199254740993}`) {
		t.Errorf("headers: %q", got)
	}

	// The editor starts from the stored text; the review shows the one
	// change; the confirmed retry produces the original with only it changed.
	edited := strings.Replace(exactValue, `"zeta":1,`, `"zeta":2,`, 1)
	consumer := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b.run(t, "open the editor", click("#retry-edit"), chromedp.WaitVisible(chromedp.CSS("#edit-value")), waitText("#edit-value-check", "Valid JSON."))
	if got := eval[string](t, b, `document.querySelector("#edit-value").value`); got != exactValue {
		t.Fatalf("the editor starts from\n%s\nwant the stored\n%s", got, exactValue)
	}
	b.run(t, "change zeta and review",
		setValue("#edit-value", edited), waitText("#edit-value-check", "Valid JSON."),
		click("#edit-review-button"), waitText("#edit-review .add mark", "2"))
	if got := tokens("#edit-review mark"); len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("the review marks %q as changed, want 1 → 2", got)
	}
	b.screenshots(t, "record-exact-review")
	b.run(t, "confirm", click("#edit-confirm"), waitText("main", "Retried with your changes"))
	got := consumeKey(t, consumer, "exact-1")
	if !bytes.Equal(got.Value, []byte(edited)) {
		t.Errorf("produced to orders (first difference at byte %d):\n%s\nwant\n%s", firstDifference(got.Value, []byte(edited)), got.Value, edited)
	}
	// The page then shows the edit as it went out.
	b.run(t, "the edit on the page", waitText("#redelivery-value", `"zeta":2`))
	if got := b.text(t, "#redelivery-value"); got != edited {
		t.Errorf("Edited for redelivery shows\n%s\nwant\n%s", got, edited)
	}
}

// A value whose lines end in CR LF keeps them: a textarea holds LF only, and
// the editor puts CR LF back when it sends the edit.
func TestRetryWithEditKeepsCRLFLineBreaks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	value := "{\r\n  \"zeta\": 1,\r\n  \"id\": 9007199254740993\r\n}"
	rec := failure("orders", "crlf-1", []byte(value), true)
	s.storeRecords(t, []dlq.Record{rec})
	consumer := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b := newBrowser(t)
	b.run(t, "edit it", chromedp.Navigate(s.base+"/ui/records/"+rec.ID), waitText("h1", "Record crlf-1"),
		click("#retry-edit"), chromedp.WaitVisible(chromedp.CSS("#edit-value")),
		setValue("#edit-value", "{\n  \"zeta\": 2,\n  \"id\": 9007199254740993\n}"), waitText("#edit-value-check", "Valid JSON."),
		click("#edit-review-button"), click("#edit-confirm"), waitText("main", "Retried with your changes"))
	want := strings.Replace(value, `"zeta": 1`, `"zeta": 2`, 1)
	if got := consumeKey(t, consumer, "crlf-1"); string(got.Value) != want {
		t.Errorf("produced %q, want %q", got.Value, want)
	}
}

// grantClipboard lets the page read and write the clipboard.
func (b *browser) grantClipboard(t *testing.T, origin string) {
	t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{Origin: origin,
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
}

// clipboard reads the clipboard's text in the page.
func (b *browser) clipboard(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read the clipboard: %v", err)
	}
	return v
}

// noSidewaysScroll checks the page is no wider than the window at 1400 and
// 800 px, saving screenshots of it as name.
func (b *browser) noSidewaysScroll(t *testing.T, name string) {
	t.Helper()
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		if got := eval[[]int](t, b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("%s at %d px: the page is %d px wide in a window of %d", name, w, got[0], got[1])
		}
		b.screenshot(t, fmt.Sprintf("%s-%d", name, w))
	}
	b.run(t, "the window's size back", chromedp.EmulateViewport(1280, 860))
}

// The record page for a day's work: the errors, then the value, lead; the
// retry schedule of an exhausted record is folded; a value of more than
// 2,000 JSON values or of 64 KiB or more opens folded with its size, and
// offers a raw view, a copy and a download of the bytes as stored; a binary
// key is marked as base64; and the page fits a window of 800 and 1400 px.
func TestTheRecordPageLeadsWithErrorsAndValue(t *testing.T) {
	t.Parallel()
	s := startServer(t, "REDRIVE_ARCHIVE_TOPIC", "off")

	// 3,753 values in under 64 KiB, with a long unbroken string.
	var many bytes.Buffer
	many.WriteString(`{"rows":[`)
	for i := range 1250 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `[%d,%d.50]`, 9007199254740993+i, i)
	}
	many.WriteString(`],"blob":"` + strings.Repeat("x", 3000) + `"}`)
	manyRec := failure("orders", "", many.Bytes(), true)
	manyRec.Key = []byte{0xff, 0x00, 'k', 0x80}
	manyRec.Errors = append(manyRec.Errors, dlq.ErrorEntry{Attempt: 2, Type: "db.timeout", Message: "timed out again: " + strings.Repeat("long-", 200),
		Code: dlq.CodeRetry, OccurredAt: testdate.Now(), Details: json.RawMessage(`{"query_ms":12345678901234567890}`),
		Backtrace: []string{"at com.example.Orders.save(Orders.java:42)"}})
	// Over 64 KiB, with few values.
	bigText := `{"note":"` + strings.Repeat("y", 70*1024) + `"}`
	// (and a key of 3,000 bytes, unbroken)
	bigKey := "big-" + strings.Repeat("0123456789abcdef", 187)
	bigRec := failure("orders", bigKey, []byte(bigText), false)
	// A small retryable one, with a binary header.
	small := failure("orders", "small-1", []byte(`{"id":9007199254740993}`), false)
	small.Headers = []dlq.Header{{Key: "trace", Value: []byte{0xde, 0xad, 0xbe, 0xef}}, {Key: "x-amount", Value: []byte("10.10")}}
	small.Meta = json.RawMessage(`{"batch":9007199254740993,"rate":10.10,"note":"a<b"}`)
	s.storeRecords(t, []dlq.Record{manyRec, bigRec, small})

	b := newBrowser(t)
	dir := b.saveDownloadsIn(t)
	b.grantClipboard(t, s.base)

	b.run(t, "the exhausted record with 3,753 values", chromedp.Navigate(s.base+"/ui/records/"+manyRec.ID),
		waitText("#value-size", "3,753 JSON values"), waitText("#value-folded", "opens folded"))
	order := eval[[]string](t, b, `[...document.querySelectorAll("main h2")].map((h) => h.textContent.split(" ")[0])`)
	if strings.Join(order, " ") != "Errors Value Headers Retry" {
		t.Errorf("the page's sections: %q, want the errors, the value, the headers and the schedule", order)
	}
	if eval[bool](t, b, `document.querySelector("#schedule").open`) {
		t.Error("the schedule of an exhausted record is open")
	}
	if got := b.text(t, "#schedule summary"); !strings.Contains(got, "exhausted") {
		t.Errorf("the folded schedule says %q", got)
	}
	if eval[bool](t, b, `document.querySelector("#value-tree > details").open`) || b.count(t, "#value-tree li") != 0 {
		t.Error("a value of 3,753 JSON values is laid out open")
	}
	if got := b.text(t, "#value-tree > details > summary"); !strings.Contains(got, "2 keys") || !strings.Contains(got, "KiB") {
		t.Errorf("the folded value says %q, want its keys and size", got)
	}
	if got := b.text(t, "#facts-key .enc"); got != "base64" {
		t.Errorf("a binary key is marked %q", got)
	}
	if got := b.text(t, "h1 .enc"); got != "base64" {
		t.Errorf("the title's binary key is marked %q", got)
	}
	if got := b.text(t, "#errors li:first-child"); !strings.Contains(got, "attempt 2") || !strings.Contains(got, "12345678901234567890") {
		t.Errorf("the latest error first, its details exact: %q", got)
	}
	b.noSidewaysScroll(t, "record-folded")

	// Open a level; Raw, Copy and Download give the value as stored.
	b.run(t, "open the folded tree", click("#value-tree > details > summary"), waitText("#value-tree", `"rows"`),
		click("#value-tree > details > ul > li:first-child > details > summary"), waitText("#value-tree", "1,250 items"),
		click("#value-tree > details > ul > li:first-child > details > ul > li:first-child > details > summary"),
		waitText("#value-tree", "9007199254740993"))
	b.run(t, "the raw view", click("#value-as-raw"), waitText("#value-raw", `"blob"`))
	if got := b.text(t, "#value-raw"); got != many.String() {
		t.Errorf("Raw shows %d characters, want the %d stored", len(got), many.Len())
	}
	b.noSidewaysScroll(t, "record-raw")
	b.run(t, "copy", click("#value-copy"), waitText("#value-copy-status", "Copied"))
	if got := b.clipboard(t); got != many.String() {
		t.Errorf("the clipboard holds %d characters, want the %d stored", len(got), many.Len())
	}
	b.run(t, "download", click("#download-value"), waitText("#download-status", manyRec.ID+".value"))
	downloaded(t, dir, manyRec.ID+".value", many.Bytes())

	// 70 KiB in two values: folded for its size; its schedule is open.
	b.run(t, "the 70 KiB record", chromedp.Navigate(s.base+"/ui/records/"+bigRec.ID),
		waitText("#value-folded", "70.0 KiB"), waitText("#value-download", "70.0 KiB"))
	if !eval[bool](t, b, `document.querySelector("#schedule").open`) {
		t.Error("the schedule of a waiting record is folded")
	}
	b.noSidewaysScroll(t, "record-large-json")
	// The long key is cut until asked, so the errors and value stay in sight.
	if got := b.text(t, "#facts-key code"); got != bigKey[:200]+"… Show all 2,996 characters" {
		t.Errorf("the 2,996-character key shows as %q", got)
	}
	b.run(t, "the whole key", click("#facts-key button"), waitText("#facts-key code", bigKey))

	// A small value opens unfolded; a binary header is marked.
	b.run(t, "the small record", chromedp.Navigate(s.base+"/ui/records/"+small.ID), waitText("#value-tree", "9007199254740993"))
	if b.count(t, "#value-folded") != 0 || !eval[bool](t, b, `document.querySelector("#value-tree > details").open`) {
		t.Error("a small value opens folded")
	}
	if got := b.text(t, "#headers"); !strings.Contains(got, "base64 3q2+7w==") || !strings.Contains(got, "10.10") {
		t.Errorf("headers: %q", got)
	}
	// Meta, numbers as written (and a string as it reads, not as the API
	// escaped it).
	if got := b.text(t, "#meta"); !strings.Contains(got, "9007199254740993") || !strings.Contains(got, "10.10") || !strings.Contains(got, `"a<b"`) {
		t.Errorf("meta: %q", got)
	}
	b.noSidewaysScroll(t, "record-small")
}

// The console's JSON reader (lib/json.js) takes exactly the texts
// JSON.parse takes, and reads them as the same values, over mutations of
// JSON texts; it keeps numbers and strings as written and every key of an
// object; and it reads a value nested 100,000 deep, as it works without
// recursion. Run in Chromium, on the module the console serves.
func TestTheJSONReaderAgreesWithJSONParse(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	b := newBrowser(t)
	b.run(t, "the console", chromedp.Navigate(s.base+"/ui/"), waitText("main", "The DLQ is empty"))
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(async () => {
		const url = document.querySelector('link[rel="modulepreload"][href$="/lib/json.js"]').href;
		const { parse, check, keyOf } = await import(url);
		const problems = [];
		// toJS builds what JSON.parse would from a parsed node, without
		// recursion, breadth first: a repeated key's last value is set last.
		const toJS = (root) => {
			let out;
			const work = [[root, (v) => { out = v; }]];
			for (let w = 0; w < work.length; w++) {
				const [n, set] = work[w];
				if (n.type === "object") {
					const o = {};
					set(o);
					for (const [key, c] of n.entries) work.push([c, (v) => { o[keyOf(key)] = v; }]);
				} else if (n.type === "array") {
					const a = [];
					set(a);
					n.items.forEach((c, i) => work.push([c, (v) => { a[i] = v; }]));
				} else set(n.type === "string" ? JSON.parse(n.text) : n.type === "number" ? Number(n.text) : JSON.parse(n.type));
			}
			return JSON.stringify(out);
		};
		const seeds = ['{"a":[1,2,{"b":"c\\u00e9"}],"d":-0.5e3,"e":true,"f":null,"g":""}', '[1,-0,1e400,"\\ud83d\\ude00",[],{}]',
			' {"x" : [ 1 , 2 ] } ', '"str\\n\\t\\/"', '123.456E-7', '[[[[["deep"]]]]]', '{"dup":1,"dup":2}'];
		const alphabet = ' {}[]",:0123456789-+.eEtrufalsn\\u\t\n\r\x00x\u00e9';
		let seed = 12345;
		const rand = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
		for (let it = 0; it < 30000 && problems.length < 10; it++) {
			let s = seeds[rand(seeds.length)];
			for (let m = 1 + rand(3); m > 0; m--) {
				const p = rand(s.length + 1), ch = alphabet[rand(alphabet.length)];
				s = [s.slice(0, p) + ch + s.slice(p), s.slice(0, p) + s.slice(p + 1), s.slice(0, p) + ch + s.slice(p + 1)][rand(3)];
			}
			let want = null;
			try { want = JSON.stringify(JSON.parse(s)); } catch { /* not JSON */ }
			const err = check(s);
			if ((err === null) !== (want !== null)) { problems.push("validity of " + JSON.stringify(s) + ": " + (err ? err.message : "taken")); continue; }
			if (want !== null && toJS(parse(s).root) !== want) problems.push("value of " + JSON.stringify(s));
		}
		// As written: numbers, strings, repeated keys; where each value lies.
		const src = '{"id":9007199254740993,"d":10.10,"e":"\\u00e9","id":-0}';
		const doc = parse(src);
		const got = doc.root.entries.map(([k, v]) => k + "=" + v.text + "@" + v.start + "-" + v.end).join(" ");
		if (got !== '"id"=9007199254740993@6-22 "d"=10.10@27-32 "e"="\\u00e9"@37-45 "id"=-0@51-53') problems.push("as written: " + got);
		// 100,000 levels: checked, counted, and folded past maxDepth.
		const deep = '{"a":['.repeat(50000) + '"bottom"' + ']}'.repeat(50000);
		const d = parse(deep, { maxDepth: 64 });
		if (d.depth !== 100000 || d.nodes !== 100001) problems.push("deep: depth " + d.depth + ", nodes " + d.nodes);
		if (check(deep.slice(0, -1)) === null) problems.push("deep: an unclosed value is taken");
		return problems;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run the reader in the page: %v", err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
