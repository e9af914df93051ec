package store

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// scanRecord reads readColumns into the row of the RecordGet query
// (queries/records.sql): its columns are readColumns, in order, and then
// in_flight.
func TestReadColumnsAreTheRecordRow(t *testing.T) {
	t.Parallel()
	var fields []string
	rt := reflect.TypeOf(storedRecord{})
	for i := range rt.NumField() {
		fields = append(fields, snake(rt.Field(i).Name))
	}
	if want := strings.Split(readColumns, ", "); !slices.Equal(fields, want) {
		t.Errorf("RecordGet reads\n%q\nwant readColumns\n%q", fields, want)
	}
}

// snake is a generated field's column name: DlqTopic is dlq_topic, ID id.
func snake(name string) string {
	if name == "ID" {
		return "id"
	}
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
