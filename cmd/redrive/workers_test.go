package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// runWorkers executes `redrive workers` with args against base.
func runWorkers(t *testing.T, base string, args ...string) (string, error) {
	t.Helper()
	cmd := workersCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--api-url", base, "--api-key", cliKey))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// `redrive workers` lists the workers a heartbeat registered, and quiets and
// terminates one (docs/api.md#worker-lifecycle).
func TestWorkersCommand(t *testing.T) {
	base, _ := cliServer(t)
	body, _ := json.Marshal(map[string]any{"worker_id": "cli-worker-1", "hostname": "web-1", "queues": []string{"orders"}})
	hreq, _ := http.NewRequest(http.MethodPost, base+"/ojs/v1/workers/heartbeat", bytes.NewReader(body))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+cliKey)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heartbeat: %d", resp.StatusCode)
	}

	out, err := runWorkers(t, base, "list")
	if err != nil || !strings.Contains(out, "cli-worker-1") || !strings.Contains(out, "web-1") || !strings.Contains(out, "1 worker: 1 running") {
		t.Fatalf("workers list: %v\n%s", err, out)
	}
	out, err = runWorkers(t, base, "quiet", "cli-worker-1")
	if err != nil || !strings.Contains(out, "worker cli-worker-1: told to quiet (state quiet") {
		t.Fatalf("workers quiet: %v\n%s", err, out)
	}
	out, err = runWorkers(t, base, "--state", "quiet", "-o", "json")
	var l struct {
		Items []struct {
			ID        string `json:"id"`
			Directive string `json:"directive"`
		} `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l.Items) != 1 || l.Items[0].Directive != "quiet" {
		t.Fatalf("workers --state quiet -o json: %v\n%s", err, out)
	}
	if out, err = runWorkers(t, base, "terminate", "cli-worker-1"); err != nil || !strings.Contains(out, "told to terminate") {
		t.Fatalf("workers terminate: %v\n%s", err, out)
	}
	if out, err = runWorkers(t, base, "quiet", "cli-worker-1"); err == nil || !strings.Contains(err.Error(), "terminate") {
		t.Fatalf("quiet after terminate: %v\n%s", err, out)
	}
	if out, err = runWorkers(t, base, "deregister", "cli-worker-1"); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("deregister a live worker: %v\n%s", err, out)
	}
	if out, err = runWorkers(t, base, "show", "no-such-worker"); err == nil {
		t.Fatalf("show an unknown worker: %s", out)
	}
}
