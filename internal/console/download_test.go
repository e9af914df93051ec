package console_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
)

// saveDownloadsIn has Chromium save downloads in dir under the name the page
// gives them (not a download id), and returns dir.
func (b *browser) saveDownloadsIn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	events := true
	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &events}); err != nil {
		t.Fatalf("set the download directory: %v", err)
	}
	return dir
}

// downloaded waits for the file name in dir (Chromium writes a download to a
// .crdownload file and renames it when done) and checks it holds want.
func downloaded(t *testing.T, dir, name string, want []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	var got []byte
	// Whole: the file may show before all of it is written.
	eventually.True(t, "the download "+name+" is saved", func() bool {
		var err error
		got, err = os.ReadFile(path)
		return err == nil && len(got) >= len(want)
	}, eventually.Within(30*time.Second))
	if !bytes.Equal(got, want) {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s: %d bytes, want the %d stored (first difference at %d); the directory holds %q",
			name, len(got), len(want), firstDifference(got, want), names)
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A binary value and a multi-megabyte one are downloaded as the exact bytes
// stored, under the name the server's Content-Disposition gives them, and
// so is a binary key; the page offers the download first for both, and the
// large value is not laid out as a tree. Downloads are reads: a read key
// may download, and the console sends it (the API wants the key on every
// call, and a plain link could not carry it).
func TestBinaryAndLargeValuesDownloadAsTheStoredBytes(t *testing.T) {
	t.Parallel()
	readKey, readDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, fmt.Appendf(nil, "keys:\n  - {name: ops-read, scope: read, sha256: %s}\n", readDigest), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "REDRIVE_AUTH_DISABLED", "false", "REDRIVE_API_KEYS_FILE", keys, "REDRIVE_ARCHIVE_TOPIC", "off")

	// Every byte value, then 10,000 random ones: not UTF-8, so base64.
	rng := rand.New(rand.NewPCG(1, 2))
	binValue := make([]byte, 0, 256+10_000)
	for i := range 256 {
		binValue = append(binValue, byte(i))
	}
	for range 10_000 {
		binValue = append(binValue, byte(rng.UintN(256)))
	}
	binKey := []byte{0x00, 0xff, 'k', 0x80, 0xc3, 0x28, '\n'}
	// 3 MiB of JSON.
	var large bytes.Buffer
	large.WriteString(`{"rows":[`)
	for i := 0; large.Len() < 3<<20; i++ {
		if i > 0 {
			large.WriteByte(',')
		}
		fmt.Fprintf(&large, `{"sku":"A-%06d","qty":%d,"note":"ünïcødé ✓ %s"}`, i, i%7, strings.Repeat("x", 150+i%40))
	}
	large.WriteString(`]}`)
	bin := failure("orders", "", binValue, true)
	bin.Key = binKey
	big := failure("orders", "", large.Bytes(), false)
	big.Key = nil // a null key: nothing to download
	s.storeRecords(t, []dlq.Record{bin, big})

	b := newBrowser(t)
	dir := b.saveDownloadsIn(t)
	b.run(t, "a read key", chromedp.Navigate(s.base+"/ui/records/"+bin.ID), chromedp.WaitVisible(chromedp.CSS("#key")),
		setValue("#key", readKey), click("#key-form button"), waitText("#who", "key: ops-read (read)"))

	// The binary record: the page says the value is binary, shows the
	// start of it as hex and offers the whole of it as a file.
	b.run(t, "the binary record", waitText("#value-download", "binary"), waitText("#value-download", "10,256 bytes"),
		waitText("main", "00000000  00 01 02 03"), waitText("#facts-key", "7 bytes"))
	b.screenshots(t, "record-binary")
	b.screenshot(t, "download") // docs/img/download.png
	b.run(t, "download its value", click("#download-value"), waitText("#download-status", bin.ID+".value"))
	downloaded(t, dir, bin.ID+".value", binValue)
	b.run(t, "download its key", click("#download-key"), waitText("#download-status", bin.ID+".key"))
	downloaded(t, dir, bin.ID+".key", binKey)

	// The large record: the download comes first, the tree only on demand.
	b.run(t, "the large record", chromedp.Navigate(s.base+"/ui/records/"+big.ID),
		waitText("h1", "Record "+big.ID), waitText("#value-download", "3.0 MiB"))
	if n := b.count(t, "#value-tree"); n != 0 {
		t.Errorf("a 3 MiB value is laid out as a tree before it is asked for (%d trees)", n)
	}
	if n := b.count(t, "#download-key"); n != 0 {
		t.Errorf("a record with a null key offers Download key")
	}
	b.screenshots(t, "record-large")
	b.run(t, "download the large value", click("#value-download button"), waitText("#download-status", big.ID+".value"))
	downloaded(t, dir, big.ID+".value", large.Bytes())
	eval[bool](t, b, `document.querySelector("#value-view").scrollIntoView(), true`)
	b.screenshots(t, "record-large-value")
	// Shown on demand, it opens folded, a level laid out as it is opened.
	steps := []struct {
		what    string
		actions []chromedp.Action[chromedp.Void]
	}{
		{"the value shown on demand", []chromedp.Action[chromedp.Void]{click("#value-show"), waitText("#value-folded", "3.0 MiB")}},
		{"its first level opened", []chromedp.Action[chromedp.Void]{click("#value-tree > details > summary"), waitText("#value-tree", `"rows"`)}},
		{"its second level opened", []chromedp.Action[chromedp.Void]{click("#value-tree > details > ul > li:first-child > details > summary"), waitText("#value-tree", "items ]")}},
		{"its third level opened", []chromedp.Action[chromedp.Void]{click("#value-tree > details > ul > li:first-child > details > ul > li:nth-child(2) > details > summary"),
			waitText("#value-tree", `"A-000001"`)}},
	}
	for _, st := range steps {
		b.run(t, st.what, st.actions...)
	}
	// Its rows are laid out 500 at a time, the rest behind a button.
	const rows = "#value-tree > details > ul > li:first-child > details > ul > li"
	n := eval[int](t, b, `document.querySelectorAll("`+rows+`").length`)
	if n != 501 || !strings.Contains(b.text(t, rows+":last-child"), "Show 500 more (500 of ") {
		t.Errorf("the rows level lays out %d entries, the last %q; want 500 and Show 500 more", n, b.text(t, rows+":last-child"))
	}
	eval[bool](t, b, `document.querySelector("`+rows+`:last-child").scrollIntoView(), true`)
	b.screenshots(t, "record-large-rows")
	b.run(t, "show 500 more rows", click(rows+":last-child > button"), waitText(rows+":nth-child(1000)", "999"))
	if n := eval[int](t, b, `document.querySelectorAll("`+rows+`").length`); n != 1001 {
		t.Errorf("after Show more the rows level lays out %d entries, want 1,000 and the button", n)
	}
}
