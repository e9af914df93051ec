package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testdate"
)

// A client that sends its headers and then dribbles (or stops) its body is
// cut off at the read timeout; the event stream outlives it.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_HTTP_READ_TIMEOUT": "1s", "REDRIVE_HTTP_WRITE_TIMEOUT": "1s"}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /ojs/v1/dead-letter/retry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"filter\":", writeKey)
	start := testdate.Now()
	// Never send the rest: the server must give up and close the connection.
	_ = conn.SetReadDeadline(testdate.Now().Add(20 * time.Second))
	_, err = io.ReadAll(conn)
	if err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
	if waited := testdate.Since(start); waited > 10*time.Second {
		t.Fatalf("connection held %v", waited)
	}

	// The event stream stays open past both timeouts.
	req, _ := http.NewRequest(http.MethodGet, b.base+"/ojs/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if first := <-lines; first != ": connected" {
		t.Fatalf("first line %q", first)
	}
	time.Sleep(2500 * time.Millisecond) // past both timeouts: the stream must still be open
	b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the event stream was closed by the server's timeouts")
			}
			if l == "event: queue.paused" {
				return
			}
		case <-deadline:
			t.Fatal("no queue.paused on the stream")
		}
	}
}
