package template

import "testing"

func TestMask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Kubernetes pods, raw and normalized.
		{"inventory-7f9c4", "inventory-<pod>"},
		{"inventory-<n>f<n>c<n>", "inventory-<pod>"},
		{"inventory-bxkqz", "inventory-<pod>"},
		{"inventory-<n>bcd", "inventory-<pod>"},
		{"order-api-7f9c4b8d6-x2k9p", "order-api-<pod>"},
		{"order-api-<hex>-x<n>k<n>p", "order-api-<pod>"},
		{"order-api-<n>d<n>f<n>b<n>c<n>x-bxkqz", "order-api-<pod>"},
		{`"worker-<n>f<n>c<n>"`, `"worker-<pod>"`},
		// Not pods: words, versions, numbers.
		{"checkout-api", "checkout-api"},
		{"redis-cache", "redis-cache"},
		{"api-v<n>", "api-v<n>"},
		{"kafka-<n>", "kafka-<n>"},
		{"us-east-<n>", "us-east-<n>"},
		{"utf-<n>", "utf-<n>"},
		// Prefixed ids.
		{"req_EtdTfodORmyyrx", "req_<id>"},
		{"ch_<n>NqwAQMW<n>WWEWFFOevlJUDJH", "ch_<id>"},
		{"cus_NffrFeUfNV<n>Hib", "cus_<id>"},
		{"sk_live_<n>HxYzAbCdEfGh", "sk_live_<id>"},
		{"https://dashboard.stripe.com/logs/req_EtdTfodORmyyrx?t=<n>", "https://dashboard.stripe.com/logs/req_<id>?t=<n>"},
		// Not ids: snake_case names.
		{"max_connections", "max_connections"},
		{"orders_pkey", "orders_pkey"},
		{"user_id", "user_id"},
		{"events_<n>", "events_<n>"},
		{"idx_OrderItems", "idx_OrderItems"},
		// Random strings without a prefix, and half-normalized ids.
		{"EtdTfodORmyyrxQ", "<id>"},
		{"x<n>k<n>p", "<id>"},
		{"<n>O<n>TN<n>T", "<id>"},
		{"ProvisionedThroughputExceededException", "ProvisionedThroughputExceededException"},
		{"HTTPSConnectionPool", "HTTPSConnectionPool"},
		{"NullPointerException", "NullPointerException"},
		{"findOrderByCustomerId", "findOrderByCustomerId"},
		{"S<n>", "S<n>"},
		{"E<n>", "E<n>"},
		// Raw addresses and durations.
		{"10.2.3.44:8443", "<ip>:<port>"},
		{"10.2.3.44", "<ip>"},
		{"30s", "<duration>"},
		{"1.5ms", "<duration>"},
		{"1m30s", "<duration>"},
		{"503", "503"},
		{"40P01", "40P01"},
		{"5s-ago", "5s-ago"},
	} {
		if got := mask(tc.in); got != tc.want {
			t.Errorf("mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
