package main

import (
	"encoding/json"
	"testing"
)

// A list row previews a value decoded from the Schema Registry wire format
// as its JSON, marked with its format, and any other value as its bytes.
func TestValuePreviewShowsADecodedValueAsItsJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		item string
		n    int
		want string
	}{
		{`{"value":"AAAAAAcCAg==","value_encoding":"base64","payload":{"customer":"c-42","total":9007199254740993},
			"value_schema":{"registry_id":7,"type":"AVRO"}}`, 60, `avro:{"customer":"c-42","total":9007199254740993}`},
		{`{"value":"AAAAAAcCAg==","value_encoding":"base64","payload":{"customer":"c-42","note":"a longer note than forty"},
			"value_schema":{"registry_id":7,"type":"PROTOBUF"}}`, 40, `protobuf:{"customer":"c-42","note":"a lo…`},
		{`{"value":"AAAAAAcCAg==","value_encoding":"base64","payload":null,"value_schema":null,"decode_pending":true}`, 40, `base64:AAAAAAcCAg==`},
		{`{"value":"{\"a\": 1}","value_encoding":"utf8","payload":{"a":1},"value_schema":null}`, 40, `{"a": 1}`},
	} {
		var r recordRow
		if err := json.Unmarshal([]byte(c.item), &r); err != nil {
			t.Fatal(err)
		}
		if got := r.valuePreview(c.n); got != c.want {
			t.Errorf("valuePreview(%s) = %s, want %s", c.item, got, c.want)
		}
	}
}
