package httpapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// A list shows every record as a preview, so that no list answer grows with
// the size of its records: key and value are prefixes (key_truncated,
// value_truncated, with key_size and value_size), payload only for a value
// shown whole, the first headers cut, the latest error cut, retry, meta and
// a large redelivery edit left out (docs/api.md, "Previews"). Postgres cuts
// them (records.ListPreviews); this renders what it read, each preview valid in
// its encoding. GET /dead-letter/{id} shows the whole record, and
// /dead-letter/{id}/raw its key or value as bytes.

// toPreviewJSON shows a record of a list.
func toPreviewJSON(p *records.RecordPreview, archiving bool) recordJSON {
	r := &p.Record
	out := toRecordJSON(r, archiving)
	out.KeySize, out.ValueSize = sizeOrNull(p.KeySize), sizeOrNull(p.ValueSize)
	out.Key, out.KeyEncoding, out.KeyTruncated = previewText(r.Key, p.KeySize, records.PreviewKeyBytes)
	out.Value, out.ValueEncoding, out.ValueTruncated = previewText(r.Value, p.ValueSize, records.PreviewValueBytes)
	out.Payload = nil
	switch {
	case r.ValueSchema != nil:
		out.Payload = r.Payload // read only when short enough (records.PreviewValueBytes)
	case !out.ValueTruncated && isPayload(r.Value):
		out.Payload = r.Value
	}

	out.HeadersTruncated = p.HeaderCount > len(r.Headers)
	for i, h := range r.Headers {
		size := p.HeaderSizes[i]
		hj := &out.Headers[i]
		hj.Key, hj.KeyTruncated = cutText(h.Key, records.PreviewHeaderKeyBytes)
		hj.KeyTruncated = hj.KeyTruncated || len(hj.Key) < size.Key
		v, enc, cut := previewText(h.Value, size.Value, records.PreviewHeaderValueBytes)
		hj.Value, hj.Encoding, hj.ValueTruncated = *v, *enc, cut
		if cut {
			hj.ValueSize = &size.Value
		}
		out.HeadersTruncated = out.HeadersTruncated || hj.KeyTruncated || hj.ValueTruncated
	}

	out.ErrorsTruncated = p.ErrorCount > len(r.Errors)
	for i := range out.Errors {
		e := &out.Errors[i]
		var cutType, cutMsg bool
		e.Type, cutType = cutText(e.Type, records.PreviewErrorTypeBytes)
		e.Message, cutMsg = cutText(e.Message, records.PreviewMessageBytes)
		e.Truncated = p.ErrorCut || cutType || cutMsg
		for j, line := range e.Backtrace {
			var cut bool
			e.Backtrace[j], cut = cutText(line, records.PreviewBacktraceLineBytes)
			e.Truncated = e.Truncated || cut
		}
		out.ErrorsTruncated = out.ErrorsTruncated || e.Truncated
	}
	out.RetryTruncated, out.MetaTruncated = p.RetryCut, p.MetaCut
	if p.RedeliveryCut && out.Redelivery != nil {
		out.Redelivery.Headers, out.Redelivery.Value, out.Redelivery.ValueEncoding = []headerJSON{}, nil, nil
		out.RedeliveryTruncated = true
	}
	return out
}

func sizeOrNull(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

// previewText shows prefix, the first bytes of a value of size bytes (-1:
// null), as text of at most limit bytes, and whether that is not all of it.
// A value that fits is shown as a record shows it (records.EncodeBytes). A cut
// one is UTF-8 cut at a rune boundary when its prefix is UTF-8 without NUL,
// else the base64 of a byte prefix; either way it is valid in its encoding.
func previewText(prefix []byte, size, limit int) (*string, *string, bool) {
	if size < 0 {
		return nil, nil, false
	}
	if len(prefix) >= size {
		s, enc := records.EncodeBytes(prefix)
		if len(s) <= limit {
			return &s, &enc, false
		}
	}
	p := trimPartialRune(prefix[:min(len(prefix), limit)])
	if utf8.Valid(p) && bytes.IndexByte(p, 0) < 0 {
		s, enc := string(p), records.EncodingUTF8
		return &s, &enc, true
	}
	s, enc := base64.StdEncoding.EncodeToString(prefix[:min(len(prefix), limit/4*3)]), records.EncodingBase64
	return &s, &enc, true
}

// trimPartialRune drops the bytes of a rune the cut at the end of p split.
func trimPartialRune(p []byte) []byte {
	for i := len(p) - 1; i >= 0 && len(p)-i < utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return p[:i]
			}
			break
		}
	}
	return p
}

// cutText cuts s to at most n bytes at a rune boundary, and says whether it did.
func cutText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// writeRecord answers with one whole record, writing its key, value and
// payload straight from r's bytes into a small buffer on the connection:
// a 1 MB value is not also held as a string, an escaped copy and a JSON
// document. The other fields of v (a record's JSON, without its
// recordBody) are encoded as usual; the key, value and payload follow them.
func writeRecord(c echo.Context, status int, r *dlq.Record, v any) error {
	head, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.Write(head[:len(head)-1]) // without its closing brace
	writeBytesField(bw, "key", r.Key)
	writeBytesField(bw, "value", r.Value)
	if p := payloadOf(r); p != nil {
		bw.WriteString(`,"payload":`)
		bw.Write(p)
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// writeBytesField writes ,"name":…,"name_encoding":… as toRecordJSON shows
// a key or value: UTF-8 text when it is UTF-8 without NUL, else base64;
// null when b is nil.
func writeBytesField(w *bufio.Writer, name string, b []byte) {
	w.WriteString(`,"` + name + `":`)
	if b == nil {
		w.WriteString(`null,"` + name + `_encoding":null`)
		return
	}
	enc := records.EncodingBase64
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		enc = records.EncodingUTF8
		writeJSONString(w, b, false)
	} else {
		w.WriteByte('"')
		e := base64.NewEncoder(base64.StdEncoding, w)
		e.Write(b)
		e.Close()
		w.WriteByte('"')
	}
	w.WriteString(`,"` + name + `_encoding":"` + enc + `"`)
}

// rawParts are what GET /dead-letter/{id}/raw downloads.
var rawParts = map[string]bool{"value": true, "key": true}

// getRaw answers a record's key or value as bytes: the whole of it, as
// received, for any size and encoding. It reads the part and the record's
// queue, nothing else of the record, and holds the part once (and its
// masked copy, for a caller who sees it masked).
func (s *Server) getRaw(c echo.Context) error {
	id, err := recordID(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := checkParams(q, map[string]bool{"part": true}); err != nil {
		return err
	}
	part := q.Get("part")
	if part == "" {
		part = "value"
	}
	if !rawParts[part] {
		return invalidParam("part", "must be value or key, got "+jsonString(part))
	}
	queue, b, err := s.rec.RecordPart(c.Request().Context(), id, part)
	if errors.Is(err, records.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	} else if err != nil {
		return err
	}
	// What the caller may do and see is the record's queue's (checkRecord,
	// without reading the record again).
	if err := mayRecord(c, &dlq.Record{ID: id, Queue: queue}); err != nil {
		return err
	}
	if m := s.maskerOf(c); m != nil && b != nil {
		// The download is masked as the record is shown: its queue says how.
		if part == "key" {
			b = m.of(queue).Key(b)
		} else {
			b = m.of(queue).Value(b)
		}
	}
	if b == nil {
		what := "a null key"
		if part == "value" {
			what = "a null value (a tombstone)"
		}
		return notFound("record " + id + " has " + what)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+id+`.`+part+`"`)
	h.Set(echo.HeaderContentLength, itoa(len(b)))
	return c.Blob(http.StatusOK, echo.MIMEOctetStream, b)
}
