package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dlq export writes a queue's records and the trailer to stdout or a file;
// dlq import stores them in another Redrive once, however often it runs,
// and refuses a cut file naming the line.
func TestCLIExportThenImportIntoAnotherRedrive(t *testing.T) {
	t.Parallel()
	src, srcPool := cliServer(t)
	dst, dstPool := cliServer(t)
	ids := seedDiscarded(t, srcPool, "orders", 30)

	out, errOut, err := run(t, src, "dlq", "export", "--queue", "orders")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 31 || !strings.HasPrefix(lines[30], `{"export":{"count":30,"complete":true`) || !strings.Contains(lines[0], ids[0]) {
		t.Fatalf("export to stdout: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !strings.HasPrefix(errOut, "exported 30 records (") {
		t.Errorf("export says %q", errOut)
	}
	file := filepath.Join(t.TempDir(), "orders.ndjson")
	if _, errOut, err := run(t, src, "dlq", "export", "--queue", "orders", "--file", file); err != nil {
		t.Fatalf("export --file: %v\n%s", err, errOut)
	}
	if b, _ := os.ReadFile(file); string(b) != out {
		t.Errorf("the file holds %d bytes, stdout had %d", len(b), len(out))
	}
	// A bad filter flag is named before anything is written.
	if _, _, err := run(t, src, "dlq", "export", "--state", "gone"); err == nil || !strings.Contains(err.Error(), "--state") {
		t.Errorf("export --state gone: %v", err)
	}

	got, _, err := run(t, dst, "dlq", "import", "--file", file)
	if err != nil || got != "imported 30 records as discarded\n" {
		t.Fatalf("import: %q, %v", got, err)
	}
	got, _, err = run(t, dst, "dlq", "import", "--file", file, "--state", "retryable")
	if err != nil || got != "imported 0 records as retryable; 30 records already stored (same id or DLQ coordinates) left as they were\n" {
		t.Fatalf("import again: %q, %v", got, err)
	}
	var n int
	if err := dstPool.QueryRow(t.Context(), "SELECT count(*) FROM redrive_record WHERE state = 'discarded'").Scan(&n); err != nil || n != 30 {
		t.Errorf("%d discarded records after importing twice (%v), want 30", n, err)
	}
	cut := filepath.Join(t.TempDir(), "cut.ndjson")
	half := out[:len(out)/2]
	if err := os.WriteFile(cut, []byte(half), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, dst, "dlq", "import", "--file", cut)
	if want := fmt.Sprintf("HTTP 422): line %d: body: malformed JSON", strings.Count(half, "\n")+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("import of a cut file: %v", err)
	}
}

// The export's trailer is what tells a whole export from a cut one.
func TestExportTrailerTellsACutExport(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body, err string
		n               int64
	}{
		{"whole", "{\"id\":1}\n{\"export\":{\"count\":1,\"complete\":true,\"filter\":{}}}\n", "", 1},
		{"cut mid-line", "{\"id\":1}\n{\"id\":", "without its trailer", 0},
		{"cut between lines", "{\"id\":1}\n", "without its trailer", 0},
		{"incomplete", "{\"export\":{\"count\":0,\"complete\":false,\"filter\":{},\"error\":\"reading records failed; export again\"}}\n",
			"stopped after 0 records: reading records failed", 0},
	} {
		var out bytes.Buffer
		tw := &trailerWriter{w: &out}
		// In pieces, as a network delivers it.
		for i := 0; i < len(c.body); i += 7 {
			if _, err := tw.Write([]byte(c.body[i:min(i+7, len(c.body))])); err != nil {
				t.Fatal(err)
			}
		}
		n, err := tw.trailer()
		if out.String() != c.body || n != c.n || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %d, %v (passed %q)", c.name, n, err, out.String())
		}
	}
}
