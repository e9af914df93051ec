package fingerprint_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
)

// Real-world messages and what they normalize to. Messages that differ only
// in ids, numbers, hosts and times must normalize alike; the signatures show
// what an operator reads in the incident list.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		// Postgres (lib/pq, pgx)
		{"pq unique", `pq: duplicate key value violates unique constraint "orders_pkey"`,
			`pq: duplicate key value violates unique constraint "orders_pkey"`},
		{"pg dial", `dial tcp 10.0.0.5:5432: connect: connection refused`,
			`dial tcp <ip>:<port>: connect: connection refused`},
		{"pgx timeout keeps the SQLSTATE", `ERROR: canceling statement due to statement timeout (SQLSTATE 57014)`,
			`ERROR: canceling statement due to statement timeout (SQLSTATE 57014)`},
		{"pgx host", `failed to connect to host=db-2.prod.internal user=app database=orders: server error (FATAL: too many connections (SQLSTATE 53300))`,
			`failed to connect to host=db-<n>.prod.internal user=app database=orders: server error (FATAL: too many connections (SQLSTATE 53300))`},
		// Kafka
		{"kafka timeout", `kafka server: Request exceeded the user-specified time limit in the request`,
			`kafka server: Request exceeded the user-specified time limit in the request`},
		{"kafka not leader", `NOT_LEADER_FOR_PARTITION: broker kafka-2.kafka.svc:9092 is not the leader for orders-7`,
			`NOT_LEADER_FOR_PARTITION: broker <host>:<port> is not the leader for orders-<n>`},
		{"kafka error code", `unable to produce: error code 6 after 3 attempts`, `unable to produce: error code 6 after <n> attempts`},
		// HTTP clients
		{"go http timeout", `Get "https://api.example.com/v1/orders/123": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
			`Get "https://<host>/v<n>/orders/<n>": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`},
		{"http status stays", `unexpected status 503 from http://10.1.2.3:8080/charge/8f14e45fceea167a5a36dedd4bea2543`,
			`unexpected status 503 from http://<host>/charge/<hex>`},
		{"retry after", `rate limited; retry after 1m30s`, `rate limited; retry after <duration>`},
		// Java: Spring and Kafka Connect
		{"spring listener", `org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method 'public void com.acme.OrderListener.listen(java.lang.String)' threw exception`,
			`org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method <str> threw exception`},
		{"java socket", `java.net.SocketTimeoutException: Read timed out after 30000 ms`,
			`java.net.SocketTimeoutException: Read timed out after <n> ms`},
		{"connect avro", `org.apache.kafka.connect.errors.DataException: Failed to deserialize data for topic orders to Avro: Unknown magic byte!`,
			`org.apache.kafka.connect.errors.DataException: Failed to deserialize data for topic orders to Avro: Unknown magic byte!`},
		// ids and times
		{"uuid", `order 0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b not found`, `order <uuid> not found`},
		{"timestamp", `lock held since 2026-11-24T20:18:21.123Z by worker 7`, `lock held since <time> by worker <n>`},
		{"date and time", `job expired at 2026-11-24 20:18:21`, `job expired at <time> <time>`},
		{"hex pointer", `nil pointer dereference at 0x7f3a9c01`, `nil pointer dereference at <hex>`},
		{"ipv6", `dial tcp [2001:db8::1]:443: i/o timeout`, `dial tcp <ip>:<port>: i/o timeout`},
		{"ipv4 alone", `no route to 10.0.3.17 (ttl 64)`, `no route to <ip> (ttl <n>)`},
		{"numbers", `amount -0.01 below 1e3 at version 5.1.1`, `amount <n> below <n> at version <n>`},
		{"whitespace", "  payment\tdeclined \n  twice ", "payment declined twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fingerprint.Normalize(tc.in); got != tc.want {
				t.Errorf("Normalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSameProblemSameFingerprint(t *testing.T) {
	same := [][2]string{
		{`dial tcp 10.0.0.5:5432: connect: connection refused`, `dial tcp 10.0.9.17:6432: connect: connection refused`},
		{`order 0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b not found`, `order 0193a5b2-0000-7d3f-9a4b-ffffffffffff not found`},
		{`Read timed out after 30000 ms`, `Read timed out after 5000 ms`},
		{`NOT_LEADER_FOR_PARTITION: broker kafka-2.kafka.svc:9092 is not the leader for orders-7`,
			`NOT_LEADER_FOR_PARTITION: broker kafka-0.kafka.svc:9093 is not the leader for orders-11`},
	}
	for _, p := range same {
		if a, b := fingerprint.Of("db.down", p[0], nil), fingerprint.Of("db.down", p[1], nil); a != b {
			t.Errorf("%q and %q: fingerprints %s and %s, want one", p[0], p[1], a, b)
		}
	}
	different := [][2]string{
		{`ERROR: canceling statement due to statement timeout (SQLSTATE 57014)`, `ERROR: deadlock detected (SQLSTATE 40P01)`},
		{`unexpected status 503 from http://10.1.2.3:8080/charge`, `unexpected status 400 from http://10.1.2.3:8080/charge`},
		{`dial tcp 10.0.0.5:5432: connect: connection refused`, `dial tcp 10.0.0.5:5432: i/o timeout`},
	}
	for _, p := range different {
		if a, b := fingerprint.Of("db.down", p[0], nil), fingerprint.Of("db.down", p[1], nil); a == b {
			t.Errorf("%q and %q share fingerprint %s; they are different problems", p[0], p[1], a)
		}
	}
	if fingerprint.Of("a", "boom", nil) == fingerprint.Of("b", "boom", nil) {
		t.Error("the error type is not part of the fingerprint")
	}
}

func TestBacktraceTopFramesWithoutLineNumbers(t *testing.T) {
	a := []string{"main.handle()", "\t/app/handler.go:42 +0x1d", "main.loop()", "\t/app/main.go:10", "runtime.main()"}
	b := []string{"main.handle()", "\t/app/handler.go:57 +0x2f", "main.loop()", "\t/app/main.go:99", "runtime.goexit()"}
	if got := fingerprint.TopFrames(a); len(got) != 3 || got[1] != "/app/handler.go" {
		t.Fatalf("TopFrames = %q", got)
	}
	if fingerprint.Of("x", "boom", a) != fingerprint.Of("x", "boom", b) {
		t.Error("line numbers and offsets changed the fingerprint")
	}
	java := []string{"at com.acme.Orders.save(Orders.java:120)", "at com.acme.Listener.on(Listener.java:33)"}
	if got := fingerprint.TopFrames(java); got[0] != "at com.acme.Orders.save(Orders.java)" {
		t.Errorf("java frame = %q", got[0])
	}
	other := []string{"main.other()", "\t/app/other.go:1"}
	if fingerprint.Of("x", "boom", a) == fingerprint.Of("x", "boom", other) {
		t.Error("a different top frame gave the same fingerprint")
	}
}

func BenchmarkOf(b *testing.B) {
	msg := `dial tcp 10.0.0.5:5432: connect: connection refused (order 0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b, attempt 3)`
	for b.Loop() {
		fingerprint.Of("db.connection_refused", msg, nil)
	}
}

// A recovered panic's stack (runtime/debug.Stack) names its goroutine and
// starts in the recovering code: neither may split or merge panics.
func TestPanicStackFromThePanickingSite(t *testing.T) {
	stack := func(goroutine, site string) []string {
		return []string{
			"goroutine " + goroutine + " [running]:",
			"runtime/debug.Stack()",
			"\t/usr/local/go/src/runtime/debug/stack.go:26 +0x5e",
			"github.com/redrive/redrive.call.func1()",
			"\t/app/redrive.go:130 +0x45",
			"panic({0x5d4a40?, 0x6b1e30?})",
			"\t/usr/local/go/src/runtime/panic.go:783 +0x132",
			"main." + site + "(...)",
			"\t/app/" + site + ".go:42 +0x1d",
			"main.loop()",
			"\t/app/main.go:10 +0x2a",
		}
	}
	if got := fingerprint.TopFrames(stack("7", "charge")); got[0] != "main.charge(...)" || got[1] != "/app/charge.go" {
		t.Errorf("TopFrames = %q, want the panicking site first", got)
	}
	if fingerprint.Of("panic", "panic: boom", stack("7", "charge")) != fingerprint.Of("panic", "panic: boom", stack("1234", "charge")) {
		t.Error("the goroutine number changed the fingerprint")
	}
	if fingerprint.Of("panic", "panic: boom", stack("7", "charge")) == fingerprint.Of("panic", "panic: boom", stack("7", "refund")) {
		t.Error("panics at different sites share a fingerprint")
	}
}

// Normalize takes any bytes without panicking, and a message of stray
// quotes and parentheses costs linear time.
func FuzzNormalize(f *testing.F) {
	for _, in := range realWorld {
		f.Add(in.messages[0])
	}
	f.Add(`'a'b"c"(d)=(e`)
	f.Fuzz(func(t *testing.T, s string) {
		fingerprint.Normalize(s)
		fingerprint.TopFrames(strings.Split(s, "\n"))
	})
}

func TestStrayQuotesCostLinearTime(t *testing.T) {
	for _, s := range []string{strings.Repeat(`'a `, 20000), strings.Repeat(`x)=(`, 20000), strings.Repeat(`a-`, 30000)} {
		if got := fingerprint.Normalize(s); len(got) == 0 {
			t.Errorf("Normalize of %d bytes is empty", len(s))
		}
	}
}

// Frames lose what differs between two runs of the same code: a Go call's
// argument values, a Python frame's line number, a goroutine's number.
func TestFramesWithoutArgumentValuesOrLines(t *testing.T) {
	for in, want := range map[string]string{
		"main.charge(0xc000012345, {0x5d4a40, 0x1})":  "main.charge(...)",
		"main.charge(...)":                            "main.charge(...)",
		`File "/app/handlers.py", line 42, in charge`: `File "/app/handlers.py", line, in charge`,
		"created by main.main in goroutine 1":         "created by main.main in goroutine",
		"at com.acme.Orders.save(Orders.java:120)":    "at com.acme.Orders.save(Orders.java)",
		"    at charge (/app/src/charge.js:42:13)":    "at charge (/app/src/charge.js)",
		"app/models/order.rb:42:in 'Order#charge'":    "app/models/order.rb:in 'Order#charge'",
		"\t/app/handler.go:42 +0x1d":                  "/app/handler.go",
	} {
		if got := fingerprint.TopFrames([]string{in}); len(got) != 1 || got[0] != want {
			t.Errorf("TopFrames(%q) = %q, want %q", in, got, want)
		}
	}
}
