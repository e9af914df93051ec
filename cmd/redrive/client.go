package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// apiClient talks to a Redrive server's HTTP API for the admin commands.
type apiClient struct {
	base   string
	from   string // where base came from: --api-url, REDRIVE_API_URL or the default
	key    string
	output string // table or json
	http   *http.Client
	out    io.Writer
	errOut io.Writer
}

// clientFlags are the flags every API command takes.
type clientFlags struct {
	url, key, output string
}

// register adds --api-url, --api-key and --output to fs (persistent flags of
// a command group).
func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "api-url", "", "Redrive API base URL (env REDRIVE_API_URL, default "+defaultAPIURL+"; redrive dev prints its own)")
	fs.StringVar(&f.key, "api-key", "", "API key (env REDRIVE_API_KEY); sent as Authorization: Bearer")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
}

// defaultAPIURL is where the admin commands look for the API unless told.
const defaultAPIURL = "http://localhost:8080"

func (f *clientFlags) client(cmd *cobra.Command) (*apiClient, error) {
	base, from := f.url, "--api-url"
	if base == "" {
		base, from = os.Getenv("REDRIVE_API_URL"), "REDRIVE_API_URL"
	}
	if base == "" {
		base, from = defaultAPIURL, "the default"
	}
	key := f.key
	if key == "" {
		key = os.Getenv("REDRIVE_API_KEY")
	}
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output: must be table or json, got %q", f.output)
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		where := from
		if from == "the default" {
			where = "--api-url"
		}
		return nil, fmt.Errorf("%s: want the API's http(s) URL, such as %s, got %q", where, defaultAPIURL, base)
	}
	return &apiClient{base: strings.TrimSuffix(base, "/"), from: from, key: key, output: f.output,
		http: &http.Client{Timeout: 60 * time.Second}, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}, nil
}

// sendError wraps the error of a request that got no answer. When nothing
// could be reached at all (refused, no such host, unreachable), it says
// which URL was tried, from where, and how to point the command elsewhere.
func (c *apiClient) sendError(method, path string, err error) error {
	var dial *net.OpError
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.As(err, &dial) && dial.Op == "dial" {
		var u *url.Error
		if errors.As(err, &u) {
			err = u.Err // it repeats the URL, said once here
		}
		return fmt.Errorf("%s %s: no Redrive API answers at %s (%s): %w. Is Redrive running there? "+
			"Set REDRIVE_API_URL or --api-url to its URL (redrive dev prints the line to export)", method, path, c.base, c.from, err)
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}

// runE adapts an API command's run function to cobra's RunE: it is given
// the client the flags describe.
func (f *clientFlags) runE(run func(cmd *cobra.Command, c *apiClient, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := f.client(cmd)
		if err != nil {
			return err
		}
		return run(cmd, c, args)
	}
}

// errorEnvelope is the API's error envelope.
type errorEnvelope struct {
	Error apiError `json:"error"`
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// do sends a request; a non-2xx answer is an *apiError. out receives the
// JSON body when non-nil; the raw body is returned as well.
func (c *apiClient) do(ctx context.Context, method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil || method != http.MethodGet && method != http.MethodHead {
		// Every write says it is JSON, with a body or without: the server
		// refuses writes that a browser form could have sent.
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.sendError(method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
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
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return raw, nil
}

// download streams the body of a GET into w and returns how many bytes it
// wrote; a non-2xx answer is an *apiError.
func (c *apiClient) download(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	hc := *c.http
	hc.Timeout = 0 // a large value may take longer than an API call; ctx bounds it
	resp, err := hc.Do(req)
	if err != nil {
		return 0, c.sendError(http.MethodGet, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var env errorEnvelope
		if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
			env.Error.Status = resp.StatusCode
			return 0, &env.Error
		}
		return 0, &apiError{Status: resp.StatusCode, Code: "http_error", Message: strings.TrimSpace(string(raw))}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("GET %s: %d of %d bytes received", path, n, resp.ContentLength)
	}
	return n, nil
}

// printJSON writes raw JSON indented.
func (c *apiClient) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = c.out.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := c.out.Write(buf.Bytes())
	return err
}

// printTable writes the API's answer: raw indented under --output json,
// else rows under header as a table.
func (c *apiClient) printTable(raw []byte, header []string, rows [][]string) error {
	if c.output == "json" {
		return c.printJSON(raw)
	}
	return c.table(header, rows)
}

// printLine writes the API's answer: raw indented under --output json, else
// one line of text (format and args as for fmt.Printf, without the newline).
func (c *apiClient) printLine(raw []byte, format string, args ...any) error {
	if c.output == "json" {
		return c.printJSON(raw)
	}
	fmt.Fprintf(c.out, format+"\n", args...)
	return nil
}

// getTable GETs a page of items from path and prints it: under --output
// json as the API answered, else as a table of header and each item's row.
func getTable[T any](ctx context.Context, c *apiClient, path string, header []string, row func(T) []string) error {
	var page struct {
		Items []T `json:"items"`
	}
	raw, err := c.do(ctx, http.MethodGet, path, nil, &page)
	if err != nil {
		return err
	}
	rows := make([][]string, len(page.Items))
	for i, it := range page.Items {
		rows[i] = row(it)
	}
	return c.printTable(raw, header, rows)
}

// getRow GETs one item from path and prints it: under --output json as the
// API answered, else as a table of header and its row.
func getRow[T any](ctx context.Context, c *apiClient, path string, header []string, row func(T) []string) error {
	var it T
	raw, err := c.do(ctx, http.MethodGet, path, nil, &it)
	if err != nil {
		return err
	}
	return c.printTable(raw, header, [][]string{row(it)})
}

// table writes rows under a header, aligned.
func (c *apiClient) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// progressBar renders a task's progress on one terminal line.
func progressBar(done, total int64, state string) string {
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	n := int(frac * width)
	return fmt.Sprintf("\r[%s%s] %3.0f%% %d/%d %s ", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, done, total, state)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// count says "1 record", "2 records", "1 topic entry", "3 topic entries".
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
