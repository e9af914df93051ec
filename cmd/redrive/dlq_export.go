package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/filter"
)

// exportTrailer is the last line of an export (docs/api.md).
type exportTrailer struct {
	Export *struct {
		Count    int64  `json:"count"`
		Complete bool   `json:"complete"`
		Error    string `json:"error"`
	} `json:"export"`
}

// trailerWriter passes an export through to w and keeps its last line, the
// trailer.
type trailerWriter struct {
	w    io.Writer
	last []byte // the last complete line, or the start of an unfinished one
	open bool   // last is unfinished
	n    int64
}

func (t *trailerWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	data := p[:n]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !t.open {
				t.last = t.last[:0]
			}
			t.last, t.open = appendBounded(t.last, data), true
			break
		}
		if !t.open {
			t.last = t.last[:0]
		}
		t.last, t.open = appendBounded(t.last, data[:i]), false
		data = data[i+1:]
	}
	return n, err
}

// appendBounded keeps at most 64 KiB of a line: a trailer is far shorter.
func appendBounded(b, p []byte) []byte {
	return append(b, p[:min(len(p), max(0, 64<<10-len(b)))]...)
}

// trailer reads the export's trailer: an error when there is none (the
// export was cut short) or it says the export is incomplete.
func (t *trailerWriter) trailer() (int64, error) {
	var tr exportTrailer
	if t.open || json.Unmarshal(t.last, &tr) != nil || tr.Export == nil {
		return 0, errors.New("the export ended without its trailer line: it was cut short; export again")
	}
	if !tr.Export.Complete {
		return tr.Export.Count, fmt.Errorf("the export stopped after %d records: %s; export again", tr.Export.Count, tr.Export.Error)
	}
	return tr.Export.Count, nil
}

func dlqExportCmd(cf *clientFlags) *cobra.Command {
	f := newDLQFilter(filter.List)
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export the records a filter selects, whole, as NDJSON (to stdout or a file)",
		Long: `export writes every record the filter flags select (the same flags as dlq list),
oldest first, one JSON object per line, then a trailer line
{"export":{"count":N,"complete":true,...}}, to stdout or the file named by --file.
"dlq import" reads it back, into this Redrive or another one. The exit status is not
zero when the export was cut short (no trailer, or one that says incomplete); a file
named by --file is then removed.`,
		Example: `  redrive dlq export --queue orders --since 2026-02-13T00:00:00Z > orders.ndjson
  REDRIVE_API_URL=https://redrive.staging redrive dlq import < orders.ndjson`,
		Args: cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error {
			if _, err := f.body(); err != nil {
				return err
			}
			out := c.out
			var fh *os.File
			if file != "" && file != "-" {
				var err error
				if fh, err = os.Create(file); err != nil {
					return err
				}
				out = fh
			}
			tw := &trailerWriter{w: out}
			_, err := c.download(cmd.Context(), "/ojs/v1/dead-letter/export?"+f.query().Encode(), tw)
			var n int64
			if err == nil {
				n, err = tw.trailer()
			}
			if fh != nil {
				if cerr := fh.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					_ = os.Remove(file)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.errOut, "exported %s (%d bytes)\n", count(n, "record"), tw.n)
			return nil
		}),
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&file, "file", "", "write the export to this file instead of stdout")
	return cmd
}

func dlqImportCmd(cf *clientFlags) *cobra.Command {
	var state, file string
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Import records exported by dlq export (NDJSON, from stdin or a file)",
		Long: `import sends an export (from stdin, or the file named by --file) to this Redrive,
which stores its records all or nothing: a bad line refuses the whole import, naming
the line and the field. Records keep their id: importing the same export twice stores
them once. They land discarded (kept for an operator; the default) or, with
--state retryable, scheduled by this Redrive's policy for their queue. Needs a write key.`,
		Args: cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error {
			if state != "discarded" && state != "retryable" {
				return fmt.Errorf("--state: must be discarded or retryable, got %q", state)
			}
			in := cmd.InOrStdin()
			if file != "" && file != "-" {
				fh, err := os.Open(file)
				if err != nil {
					return err
				}
				defer fh.Close()
				in = fh
			}
			var res struct {
				State    string `json:"state"`
				Received int64  `json:"received"`
				Imported int64  `json:"imported"`
				Skipped  int64  `json:"skipped"`
			}
			raw, err := c.upload(cmd.Context(), "/ojs/v1/dead-letter/import?state="+state, "application/x-ndjson", bufio.NewReaderSize(in, 1<<20), &res)
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("imported %s as %s", count(res.Imported, "record"), res.State)
			if res.Skipped > 0 {
				msg += fmt.Sprintf("; %s already stored (same id or DLQ coordinates) left as they were", count(res.Skipped, "record"))
			}
			return c.printLine(raw, "%s", msg)
		}),
	}
	cmd.Flags().StringVar(&state, "state", "discarded", "state the records land in: discarded (kept for an operator) or retryable (scheduled by this Redrive's policy)")
	cmd.Flags().StringVar(&file, "file", "", "read the export from this file instead of stdin")
	return cmd
}

// upload POSTs body (streamed, of content type ct) to path; the JSON answer
// goes to out. Unlike do, no overall timeout: ctx bounds it.
func (c *apiClient) upload(ctx context.Context, path, ct string, body io.Reader, out any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ct)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.sendError(http.MethodPost, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var env errorEnvelope
		if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
			env.Error.Status = resp.StatusCode
			return raw, &env.Error
		}
		return raw, &apiError{Status: resp.StatusCode, Code: "http_error", Message: strings.TrimSpace(string(raw))}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return raw, fmt.Errorf("decode answer of POST %s: %w", path, err)
	}
	return raw, nil
}
