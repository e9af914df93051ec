// Package fingerprint groups failures: two failures with the same error type
// and the same message up to its variable parts (ids, numbers, hosts, times)
// share a fingerprint, so 40,000 dead letters show as the 3 problems they are.
//
// Normalize is the one place the rules live (the client library's flood
// guard uses them too). It reads the message word by word (a word is a run of
// anything but whitespace) and replaces, wherever they stand in a word
// (inside a URL or a path, after "=" or ":", in parentheses):
//
//   - quoted strings ("…", '…', `…`)                       → <str>, but see below
//   - URLs: scheme kept, host and port replaced, path normalized, query values
//     replaced                                               → https://<host>/v<n>/orders/<n>?page=<v>
//   - UUIDs                                                 → <uuid>
//   - timestamps and dates (2026-11-24T20:18:21Z, 20:18:21)   → <time>
//   - IPv4 and IPv6 addresses, with their port             → <ip>:<port>
//   - host:port                                             → <host>:<port>
//   - email addresses                                       → <email>
//   - durations (250ms, 1m30s, 2.5s)                        → <duration>
//   - hex ids (0x7f3a…, or 6+ hex digits with a digit and a letter) → <hex>
//   - ULIDs, and base62/base64 tokens that look random (Stripe-style ids,
//     request ids, JWTs, nanoids)                           → <id>
//   - the row of a SQL detail, "Key (col)=(value)" and "Failing row contains
//     (…)"                                                    → (col)=(<v>), (<v>)
//   - any other run of digits, inside words too            → <n>
//
// A quoted string stays, its content normalized, when it names something
// rather than holds data: after a word such as constraint, relation, table,
// column, index, key, field, attribute, topic or bucket (`unique constraint
// "orders_pkey"`), before "object" (`'NoneType' object`), in backticks, or
// when it is a URL; the quoted error of a gRPC status (desc = "…") is
// normalized as a message. A key=value keeps its key and normalizes its
// value; a value that is a plain word stays (`database=orders`). Words are
// never replaced: an error type or a plain English message stays as written.
//
// Error codes stay: a five-character SQLSTATE after "SQLSTATE" and a number
// after "status", "code", "error", "errno" (and status=, code= …) tell
// different problems apart. Whitespace collapses to single spaces. A
// backtrace adds its top frames with line numbers, offsets and argument
// values removed (for a recovered Go panic, the top frames below the
// runtime's panic call: see TopFrames).
//
// The rules are versioned (Version): a fingerprint carries the version it was
// computed under, and Redrive re-fingerprints stored records when it changes.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// Frames is how many top backtrace frames take part in a fingerprint.
const Frames = 3

// Version numbers the rules of Normalize and TopFrames. It goes into every
// fingerprint, so one computed under other rules never equals one computed
// under these, and Redrive stores with each incident the version it was
// recorded under: records whose incident has an older version are
// fingerprinted again in the background (internal/maintenance).
//
//   - 1: the first rules.
//   - 2: ids wherever they stand (a UUID after "=", in a path or in
//     parentheses), emails, ULIDs and random tokens, query strings, SQL
//     details; quoted names kept; frames without Go argument values or
//     Python line numbers.
//
// Change it whenever a change to the rules changes any fingerprint.
const Version = 2

// salt starts every hashed input: the rules' version.
var salt = []byte("redrive-fingerprint/" + strconv.Itoa(Version) + "\n")

// Of returns the fingerprint of a failure: 16 hex characters of a hash of
// the rules' version, the error type, the normalized message and the top
// backtrace frames.
func Of(errorType, message string, backtrace []string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(errorType))
	h.Write([]byte{'\n'})
	h.Write([]byte(Normalize(message)))
	for _, f := range TopFrames(backtrace) {
		h.Write([]byte{'\n'})
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// TopFrames returns the first Frames non-empty frames of a backtrace without
// line numbers, columns, program-counter offsets and argument values:
// "\t/app/handler.go:42 +0x1d" becomes "/app/handler.go",
// "main.charge(0xc000012345, {0x5d4a40, 0x1})" becomes "main.charge(...)",
// "at com.acme.X.run(X.java:42)" becomes "at com.acme.X.run(X.java)" and
// `File "/app/x.py", line 42, in charge` becomes `File "/app/x.py", line, in
// charge`.
//
// A Go panic stack (runtime/debug.Stack) starts at the panicking site: its
// "goroutine 7 [running]:" line, whose number differs from one panic to the
// next, and the frames up to and including the runtime's panic call (the
// recovering code, the same for every panic) are skipped.
func TopFrames(backtrace []string) []string {
	backtrace = afterPanic(backtrace)
	var out []string
	for _, f := range backtrace {
		f = strings.TrimSpace(f)
		if f == "" || isGoroutineHeader(f) {
			continue
		}
		if i := strings.Index(f, " +0x"); i >= 0 {
			f = f[:i]
		}
		out = append(out, normalizeFrame(f))
		if len(out) == Frames {
			break
		}
	}
	return out
}

// normalizeFrame removes what differs between two runs of the same code
// from a frame: line and column numbers, a Go call's argument values, a
// Python frame's line number, a goroutine's number.
func normalizeFrame(f string) string {
	// Go: "main.charge(0xc000012345, {0x5d4a40, 0x1})" → "main.charge(...)".
	if strings.HasSuffix(f, ")") {
		if i := strings.IndexByte(f, '('); i > 0 && strings.Contains(f[i:], "0x") {
			f = f[:i] + "(...)"
		}
	}
	// Python: `File "/app/x.py", line 42, in charge`.
	if i := strings.Index(f, ", line "); i >= 0 {
		j := i + len(", line ")
		k := j
		for k < len(f) && isDigit(f[k]) {
			k++
		}
		if k > j {
			f = f[:i] + ", line" + f[k:]
		}
	}
	// Go: "created by main.main in goroutine 7".
	if i := strings.Index(f, " in goroutine "); i >= 0 && allDigits(f[i+len(" in goroutine "):]) {
		f = f[:i+len(" in goroutine")]
	}
	return stripLineNumbers(f)
}

// afterPanic returns the frames of a Go panic stack below the runtime's
// panic call ("panic({0x…})" and its file line), or backtrace itself when it
// has none.
func afterPanic(backtrace []string) []string {
	for i, f := range backtrace {
		if strings.HasPrefix(strings.TrimSpace(f), "panic(") && i+1 < len(backtrace) &&
			strings.Contains(backtrace[i+1], "runtime/panic.go:") {
			return backtrace[i+2:]
		}
	}
	return backtrace
}

// isGoroutineHeader reports whether f is a Go stack's "goroutine 7 [running]:".
func isGoroutineHeader(f string) bool {
	rest, ok := strings.CutPrefix(f, "goroutine ")
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && isDigit(rest[n]) {
		n++
	}
	return n > 0 && strings.HasPrefix(rest[n:], " [")
}

// stripLineNumbers removes ":<digits>" runs (line and column numbers).
func stripLineNumbers(f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] == ':' && i+1 < len(f) && isDigit(f[i+1]) {
			j := i + 1
			for j < len(f) && isDigit(f[j]) {
				j++
			}
			i = j - 1
			continue
		}
		b.WriteByte(f[i])
	}
	return b.String()
}

// maxQuoted bounds how long a quoted string is, and maxParens how far a SQL
// detail's row reaches, so that a message of stray quotes or parentheses
// costs linear time.
const (
	maxQuoted = 2048
	maxParens = 512
)

// Normalize returns message with its variable parts replaced by placeholders
// (see the package documentation for the rules).
func Normalize(message string) string {
	var n normalizer
	n.b.Grow(len(message))
	n.run(message)
	return n.b.String()
}

// normalizer writes a normalized message, remembering the last two words
// (without the punctuation around them) for the rules that look back.
type normalizer struct {
	b           strings.Builder
	prev, prev2 string
	// closers holds, per quote character, the positions of the quotes that
	// may close a string (see closingQuote); found once per message.
	closers *[3][]int
}

func (n *normalizer) run(s string) {
	// The end of the word being read, and where the next SQL detail ")=("
	// is: kept while a word is read in parts, so that a long word costs
	// linear time.
	wordEnd, detail := 0, -1
	for i := 0; i < len(s); {
		c := s[i]
		if isSpace(c) {
			for i < len(s) && isSpace(s[i]) {
				i++
			}
			if n.b.Len() > 0 && i < len(s) {
				n.b.WriteByte(' ')
			}
			continue
		}
		if isQuote(c) {
			if end := n.closingQuote(s, i); end > 0 {
				n.quoted(s[i+1:end], c, nextWordIs(s, end+1, "object"))
				i = end + 1
				continue
			}
		}
		// A word runs to a space, or to a quote that opens a string
		// (`host='db'`, `ObjectId("…")`).
		j := wordEnd
		if i >= wordEnd {
			j = i + 1
			for j < len(s) && !isSpace(s[j]) {
				if isQuote(s[j]) && opensQuote(s, j) && n.closingQuote(s, j) > 0 {
					break
				}
				j++
			}
			wordEnd = j
		}
		word := s[i:j]
		// A SQL detail's row: Key (id)=(…), Key (a, b)=(1, 2), Failing row
		// contains (…). The values are data, whatever they are.
		if detail < i && detail != len(s) {
			if k := strings.Index(s[i:], ")=("); k >= 0 {
				detail = i + k
			} else {
				detail = len(s)
			}
		}
		if detail < j {
			n.word(s[i : detail+1])
			n.b.WriteString("=(<v>)")
			i = skipParens(s, detail+3, j)
			continue
		}
		if word[0] == '(' && strings.EqualFold(n.prev, "contains") {
			n.b.WriteString("(<v>)")
			i = skipParens(s, i+1, j)
			continue
		}
		n.word(word)
		i = j
	}
}

// word writes one word, normalized, and remembers it.
func (n *normalizer) word(w string) {
	normalizeWord(&n.b, w, n.prev)
	// "host=" (the key of a quoted value that follows) is remembered as "host".
	if strings.HasSuffix(w, "=") {
		k := len(w) - 1
		for k > 0 && isKeyByte(w[k-1]) {
			k--
		}
		if k < len(w)-1 {
			n.remember(w[k : len(w)-1])
			return
		}
	}
	i, j := 0, len(w)
	for i < j && isPunct(w[i]) {
		i++
	}
	for j > i && isPunct(w[j-1]) {
		j--
	}
	n.remember(w[i:j])
}

// isPunct: what surrounds a word without being part of it.
func isPunct(c byte) bool {
	switch c {
	case '(', '[', '{', '<', '"', '\'', '`', ')', ']', '}', '>', ',', ';', ':', '.', '!', '?', '=':
		return true
	}
	return false
}

// remember makes w the previous word; punctuation alone ("=", "-") is
// skipped, so that `desc = "…"` still follows desc.
func (n *normalizer) remember(w string) {
	if w == "" {
		return
	}
	n.prev2, n.prev = n.prev, w
}

// quoted writes a quoted string: kept (normalized) when it names something,
// normalized as a message when it is a gRPC status's error, else <str>.
func (n *normalizer) quoted(content string, q byte, objectNext bool) {
	spaced := strings.ContainsAny(content, " \t\r\n")
	switch {
	case !spaced && content != "" && len(content) <= 256 &&
		(q == '`' || namesSomething(n.prev) || objectNext || strings.Contains(content, "://")):
		n.b.WriteByte(q)
		normalizeWord(&n.b, content, "")
		n.b.WriteByte(q)
	case strings.EqualFold(n.prev, "desc"):
		n.b.WriteByte(q)
		n.b.WriteString(Normalize(content))
		n.b.WriteByte(q)
	default:
		n.b.WriteString("<str>")
	}
	n.remember("<str>")
}

// namers are the words after which a quoted string is a name (of a
// constraint, a column, a Kafka topic, a Python attribute, a Java method),
// not data.
var namers = [...]string{
	"constraint", "relation", "table", "column", "index", "schema", "database", "sequence", "function",
	"type", "trigger", "view", "extension", "collection", "key", "field", "property", "attribute",
	"parameter", "param", "header", "topic", "queue", "bucket", "module", "class", "enum", "host",
	"keyerror", "invoke", "because",
}

func namesSomething(w string) bool {
	if len(w) < 3 || len(w) > 10 {
		return false
	}
	for _, k := range namers {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	return false
}

// codeWords are the words after which a number is a code that tells
// problems apart (HTTP statuses, Kafka and MySQL error codes).
var codeWords = [...]string{"status", "code", "statuscode", "status_code", "http_status", "errno", "error", "errorcode", "http"}

func isCodeWord(w string) bool {
	if len(w) < 4 || len(w) > 11 {
		return false
	}
	for _, k := range codeWords {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	return false
}

// opensQuote reports whether the quote at s[j] may open a quoted string: it
// starts a word or follows "(", "=", ":" and the like — not an apostrophe
// inside a word (doesn't).
func opensQuote(s string, j int) bool {
	return j == 0 || isSpace(s[j-1]) || strings.IndexByte("([{=:,<", s[j-1]) >= 0
}

// closingQuote returns the index of the quote that closes the one at s[i]:
// the next same quote, not escaped, followed by a space, punctuation or the
// end, on the same line and within maxQuoted bytes; -1 when there is none.
func (n *normalizer) closingQuote(s string, i int) int {
	if n.closers == nil {
		n.closers = new([3][]int)
		for k := 0; k < len(s); k++ {
			if q := quoteIndex(s[k]); q >= 0 && (k == 0 || s[k-1] != '\\') &&
				(k+1 == len(s) || isSpace(s[k+1]) || strings.IndexByte(")]},;:.!?>=", s[k+1]) >= 0) {
				n.closers[q] = append(n.closers[q], k)
			}
		}
	}
	cs := n.closers[quoteIndex(s[i])]
	at, _ := slices.BinarySearch(cs, i+1)
	if at == len(cs) || cs[at] > i+maxQuoted {
		return -1
	}
	k := cs[at]
	if nl := strings.IndexByte(s[i+1:k], '\n'); nl >= 0 {
		return -1
	}
	return k
}

func quoteIndex(c byte) int { return strings.IndexByte("\"'`", c) }

// nextWordIs reports whether the word after s[p:] (past spaces) starts
// with w.
func nextWordIs(s string, p int, w string) bool {
	for p < len(s) && isSpace(s[p]) {
		p++
	}
	return len(s)-p >= len(w) && strings.EqualFold(s[p:p+len(w)], w)
}

// skipParens returns the index after the ")" that closes the parenthesis
// opened just before s[p], across spaces; when none closes it within
// maxParens bytes, the end of the word, wordEnd.
func skipParens(s string, p, wordEnd int) int {
	depth := 1
	for k := p; k < len(s) && k <= p+maxParens; k++ {
		switch s[k] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return k + 1
			}
		}
	}
	return wordEnd
}

// normalizeWord writes one word, normalized. Leading and trailing
// punctuation stays as it is around the normalized core.
func normalizeWord(b *strings.Builder, word, prev string) {
	lead := 0
	for lead < len(word) && strings.IndexByte("({<", word[lead]) >= 0 { // not [: [::1]:443
		lead++
	}
	trail := len(word)
	for trail > lead && strings.IndexByte(")]}>,;.:!?", word[trail-1]) >= 0 {
		trail--
	}
	b.WriteString(word[:lead])
	core := word[lead:trail]
	switch {
	case core == "":
	case strings.EqualFold(prev, "sqlstate") && len(core) == 5:
		b.WriteString(core)
	case isCodeWord(prev) && allDigits(core):
		b.WriteString(core)
	default:
		normalizeCore(b, core)
	}
	b.WriteString(word[trail:])
}

// normalizeCore writes a word stripped of surrounding punctuation,
// classified.
func normalizeCore(b *strings.Builder, w string) {
	if w == "" {
		return
	}
	if scheme, rest, ok := strings.Cut(w, "://"); ok && isWordLike(scheme) {
		writeURL(b, scheme, rest)
		return
	}
	if strings.IndexByte(w, ',') >= 0 { // a list (a=1,b=2): each item alone
		for {
			item, rest, more := strings.Cut(w, ",")
			normalizeCore(b, item)
			if !more {
				return
			}
			b.WriteByte(',')
			w = rest
		}
	}
	switch {
	case isIPv4(w):
		b.WriteString("<ip>")
		return
	case isNumber(w):
		b.WriteString("<n>")
		return
	case isUUID(w):
		b.WriteString("<uuid>")
		return
	case timeLen(w) == len(w):
		b.WriteString("<time>")
		return
	case emailLen(w) == len(w):
		b.WriteString("<email>")
		return
	}
	if k := strings.IndexByte(w, '='); k > 0 && isKey(w[:k]) {
		replaceParts(b, w[:k])
		b.WriteByte('=')
		if v := w[k+1:]; isCodeWord(w[:k]) && allDigits(v) || strings.EqualFold(w[:k], "sqlstate") && len(v) == 5 {
			b.WriteString(v)
		} else {
			normalizeCore(b, v)
		}
		return
	}
	if addr, ok := beforePort(w); ok {
		switch {
		case isIPv4(addr) || isIPv6(addr):
			b.WriteString("<ip>:<port>")
			return
		case isHost(addr):
			b.WriteString("<host>:<port>")
			return
		}
	}
	switch {
	case isIPv4(w) || isIPv6(strings.Trim(w, "[]")):
		b.WriteString("<ip>")
	case isDuration(w):
		b.WriteString("<duration>")
	case isHexID(w):
		b.WriteString("<hex>")
	case isBase64Token(w):
		b.WriteString("<id>")
	case w[0] == '/' && strings.IndexByte(w, '?') > 0: // a path with a query
		path, query, _ := strings.Cut(w, "?")
		replaceParts(b, path)
		writeQuery(b, query)
	default:
		replaceParts(b, w)
	}
}

// writeURL writes a URL with its host replaced, its path normalized and its
// query's values replaced.
func writeURL(b *strings.Builder, scheme, rest string) {
	b.WriteString(scheme)
	end := strings.IndexAny(rest, "/?#")
	host := rest
	if end >= 0 {
		host = rest[:end]
	}
	if strings.IndexByte(host, '@') >= 0 {
		b.WriteString("://<user>@<host>")
	} else {
		b.WriteString("://<host>")
	}
	if end < 0 {
		return
	}
	rest = rest[end:]
	rest, fragment, hasFragment := strings.Cut(rest, "#")
	path, query, hasQuery := strings.Cut(rest, "?")
	replaceParts(b, path)
	if hasQuery {
		writeQuery(b, query)
	}
	if hasFragment {
		b.WriteByte('#')
		replaceParts(b, fragment)
	}
}

// writeQuery writes "?" and a query string's keys, their values replaced:
// ?customer=<v>&limit=<v>.
func writeQuery(b *strings.Builder, query string) {
	b.WriteByte('?')
	for i := 0; ; i++ {
		param, rest, more := strings.Cut(query, "&")
		if i > 0 {
			b.WriteByte('&')
		}
		key, _, hasValue := strings.Cut(param, "=")
		replaceParts(b, key)
		if hasValue {
			b.WriteString("=<v>")
		}
		if !more {
			return
		}
		query = rest
	}
}

// replaceParts writes w with the ids inside it replaced, segment by segment
// between separators ("order-123" → "order-<n>", "v1/orders/9f1c…" →
// "v<n>/orders/<uuid>", "user_id:0193…" → "user_id:<uuid>"). Ids that hold
// separators themselves (UUIDs, times, IP addresses, emails, tokens with -
// and _) are recognized where a segment starts, before splitting.
func replaceParts(b *strings.Builder, w string) {
	runChecked := 0 // the random-token check has looked at w up to here
	for i := 0; i < len(w); {
		if isSeparator(w[i]) {
			b.WriteByte(w[i])
			i++
			continue
		}
		if n := idAt(b, w, i, &runChecked); n > 0 {
			i += n
			continue
		}
		j := i
		for j < len(w) && !isSeparator(w[j]) {
			j++
		}
		seg := w[i:j]
		switch {
		case isHexID(seg):
			b.WriteString("<hex>")
		case isULID(seg):
			b.WriteString("<id>")
		default:
			writeDigitsReplaced(b, seg)
		}
		i = j
	}
}

// idAt recognizes an id that starts at w[i] and may hold separators; it
// writes its placeholder and returns its length, or returns 0.
func idAt(b *strings.Builder, w string, i int, runChecked *int) int {
	rest := w[i:]
	if len(rest) >= 36 && isUUID(rest[:36]) && !endsInside(w, i+36) {
		b.WriteString("<uuid>")
		return 36
	}
	if n := timeLen(rest); n > 0 {
		b.WriteString("<time>")
		return n
	}
	if n := ipv4Len(rest); n > 0 && !endsInside(w, i+n) {
		b.WriteString("<ip>")
		if p := portLen(rest[n:]); p > 0 {
			b.WriteString(":<port>")
			n += p
		}
		return n
	}
	if n := emailLen(rest); n > 0 {
		b.WriteString("<email>")
		return n
	}
	// A random token that may hold - and _ (nanoids, ch_3MqLx2…): checked
	// once per run of token characters, and again after a word prefix. A
	// hex id is the segment's to write.
	if i < *runChecked {
		return 0
	}
	seg := 0
	for seg < len(rest) && !isSeparator(rest[seg]) {
		seg++
	}
	if isHexID(rest[:seg]) {
		return 0
	}
	n := 0
	for n < len(rest) && (isAlnum(rest[n]) || rest[n] == '-' || rest[n] == '_') {
		n++
	}
	*runChecked = i + n
	if n < 10 || !isRandomToken(rest[:n]) {
		return 0
	}
	// "ch_3MqLx2…", "order-V1StGX…": the lowercase word before it stays.
	p := 0
	for p < n && rest[p] >= 'a' && rest[p] <= 'z' {
		p++
	}
	if p > 0 && p < n && (rest[p] == '_' || rest[p] == '-') {
		*runChecked = i + p + 1
		return 0
	}
	b.WriteString("<id>")
	return n
}

// endsInside reports whether w[k] continues a word of letters and digits,
// so that an id recognized up to k would end inside one.
func endsInside(w string, k int) bool { return k < len(w) && isAlnum(w[k]) }

func writeDigitsReplaced(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		if isDigit(s[i]) {
			j := i
			for j < len(s) && (isDigit(s[j]) || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])) {
				j++
			}
			b.WriteString("<n>")
			i = j
			continue
		}
		b.WriteByte(s[i])
		i++
	}
}

func isSpace(c byte) bool     { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isQuote(c byte) bool     { return c == '"' || c == '\'' || c == '`' }
func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isLower(c byte) bool     { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool     { return c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool     { return isDigit(c) || isLower(c) || isUpper(c) }
func isHex(c byte) bool       { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isSeparator(c byte) bool { return separators[c] }

// separators split a word into the segments replaceParts classifies.
var separators = func() (t [256]bool) {
	for _, c := range []byte("/-_.=:@,?&#+()[]{}<>;|!*$~^%'\"`\\") {
		t[c] = true
	}
	return t
}()

func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// isKey: the key of a key=value, a name of letters, digits, _, - and . with
// a letter.
func isKey(s string) bool {
	if len(s) > 64 {
		return false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		if !isKeyByte(s[i]) {
			return false
		}
		letter = letter || isLower(s[i]) || isUpper(s[i])
	}
	return letter
}

func isWordLike(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isUUID: 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// isHexID: 0x followed by hex digits, or 8 or more hex digits with at least
// one decimal digit and one letter (git SHAs, trace ids, object ids), or 6
// or 7 with lowercase letters (short hashes in paths; not codes such as
// E11000).
func isHexID(s string) bool {
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		for i := 2; i < len(s); i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	}
	if len(s) < 6 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			digit = true
		case isHex(c):
			if len(s) < 8 && isUpper(c) {
				return false
			}
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

// isNumber: a number, signed, with decimals or dotted parts (-0.01, 5.1.1,
// 1e400).
func isNumber(s string) bool {
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" || !isDigit(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && !(c == '.' || c == 'e' || c == 'E') || !isDigit(s[i-1]) && !isDigit(c) {
			return false
		}
	}
	return isDigit(s[len(s)-1])
}

// isULID: 26 characters of Crockford's base32 (no I, L, O, U), the first
// 0-7, with a digit.
func isULID(s string) bool {
	if len(s) != 26 || s[0] < '0' || s[0] > '7' {
		return false
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			digits++
		case isUpper(c) && c != 'I' && c != 'L' && c != 'O' && c != 'U':
		default:
			return false
		}
	}
	return digits > 1
}

// isBase64Token: a standard base64 value (with + or / and = padding, or
// with + inside) of 16 or more characters that looks random: S3's host ids,
// request signatures.
func isBase64Token(s string) bool {
	if len(s) < 16 {
		return false
	}
	body := strings.TrimRight(s, "=")
	if len(s)-len(body) > 2 || !(len(body) < len(s) || strings.IndexByte(body, '+') >= 0) {
		return false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !isAlnum(c) && c != '+' && c != '/' {
			return false
		}
	}
	return isRandomToken(body)
}

// isRandomToken reports whether s, a run of letters, digits and - _ + /
// of 10 or more characters, reads as a generated id rather than as words
// (an identifier such as S3Exception, Log4j2Config, utf8mb4_unicode_ci or
// NOT_LEADER_OR_FOLLOWER, or a plain word).
//
// Words split at case changes and non-letters ("Http2Exception" → Http,
// Exception) are long and hold vowels; a random base62 token splits into
// short pieces, several without a vowel, or is dense with digits.
func isRandomToken(s string) bool {
	alnum, digitRuns, longest, vowelless := 0, 0, 0, 0
	upper, lower, uniform := false, false, true
	partUpper, partLower := false, false // case of the current -/_-separated part
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isDigit(c):
			alnum++
			if i == 0 || !isDigit(s[i-1]) {
				digitRuns++
			}
			i++
		case isLower(c) || isUpper(c):
			// A piece: an uppercase run and the lowercase run after it
			// ("HTTPServer" → HTTP, Server), or a lowercase run.
			j := i
			for j < len(s) && isUpper(s[j]) {
				j++
			}
			if j-i > 1 && j < len(s) && isLower(s[j]) {
				j-- // the last capital starts the next word
			} else {
				for j < len(s) && isLower(s[j]) {
					j++
				}
			}
			piece := s[i:j]
			alnum += len(piece)
			longest = max(longest, len(piece))
			if len(piece) > 1 && !strings.ContainsAny(piece, "aeiouAEIOU") {
				vowelless++
			}
			for k := i; k < j; k++ {
				if isUpper(s[k]) {
					upper, partUpper = true, true
				} else {
					lower, partLower = true, true
				}
			}
			if partUpper && partLower {
				uniform = false
			}
			i = j
		default:
			partUpper, partLower = false, false
			i++
		}
	}
	switch {
	case alnum < 10 || !upper && !lower:
		return false
	case uniform && strings.ContainsAny(s, "-_") || uniform && !(upper && lower) && digitRuns == 0:
		// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, orders_pkey: each part
		// one case, words.
		return false
	case digitRuns > 0:
		return digitRuns >= 3 && digitRuns*8 >= alnum || longest <= 5 && (vowelless >= 2 || digitRuns >= 2)
	default:
		return upper && lower && longest <= 5 && vowelless >= 2
	}
}

// timeLen returns the length of the timestamp that starts s: a date
// (2026-11-24, optionally with a time: T, _ or a space and
// hh:mm[:ss[.frac]], and a zone Z or ±hh[:]mm), or a time of day
// hh:mm:ss[.frac]; 0 when s starts with none.
func timeLen(s string) int {
	if len(s) >= 10 && allDigits(s[:4]) && s[4] == '-' && allDigits(s[5:7]) && s[7] == '-' && allDigits(s[8:10]) {
		n := 10
		if n+1 < len(s) && (s[n] == 'T' || s[n] == '_') {
			if m := clockLen(s[n+1:], 5); m > 0 {
				n += 1 + m
				n += zoneLen(s[n:])
			}
		}
		return n
	}
	if m := clockLen(s, 8); m > 0 {
		return m
	}
	return 0
}

// clockLen returns the length of hh:mm[:ss[.frac]] at the start of s, at
// least minLen long, or 0.
func clockLen(s string, minLen int) int {
	if len(s) < 5 || !allDigits(s[:2]) || s[2] != ':' || !allDigits(s[3:5]) {
		return 0
	}
	n := 5
	if len(s) >= 8 && s[5] == ':' && allDigits(s[6:8]) {
		n = 8
		if n+1 < len(s) && (s[n] == '.' || s[n] == ',') && isDigit(s[n+1]) {
			n++
			for n < len(s) && isDigit(s[n]) {
				n++
			}
		}
	}
	if n < minLen {
		return 0
	}
	return n
}

func zoneLen(s string) int {
	switch {
	case s == "":
		return 0
	case s[0] == 'Z':
		return 1
	case (s[0] == '+' || s[0] == '-') && len(s) >= 6 && allDigits(s[1:3]) && s[3] == ':' && allDigits(s[4:6]):
		return 6
	case (s[0] == '+' || s[0] == '-') && len(s) >= 5 && allDigits(s[1:5]):
		return 5
	}
	return 0
}

// ipv4Len returns the length of the IPv4 address that starts s, or 0.
func ipv4Len(s string) int {
	n, parts, run := 0, 1, 0
	for n < len(s) {
		c := s[n]
		if isDigit(c) {
			if run++; run > 3 {
				return 0
			}
		} else if c == '.' && run > 0 && parts < 4 && n+1 < len(s) && isDigit(s[n+1]) {
			parts, run = parts+1, 0
		} else {
			break
		}
		n++
	}
	if parts != 4 {
		return 0
	}
	return n
}

// portLen returns the length of the ":port" that starts s, or 0.
func portLen(s string) int {
	if len(s) < 2 || s[0] != ':' {
		return 0
	}
	m := 1
	for m < len(s) && isDigit(s[m]) {
		m++
	}
	if m == 1 || m < len(s) && isAlnum(s[m]) || !isPort(s[1:m]) {
		return 0
	}
	return m
}

// emailLen returns the length of the email address that starts s
// (local@domain.tld), or 0.
func emailLen(s string) int {
	at := 0
	for at < len(s) && at <= 64 && (isAlnum(s[at]) || strings.IndexByte("._%+-", s[at]) >= 0) {
		at++
	}
	if at == 0 || at >= len(s) || s[at] != '@' {
		return 0
	}
	n, dots, label := at+1, 0, 0
scan:
	for n < len(s) {
		c := s[n]
		switch {
		case isAlnum(c) || c == '-':
			label++
		case c == '.' && label > 0 && n+1 < len(s) && isAlnum(s[n+1]):
			dots, label = dots+1, 0
		default:
			break scan
		}
		n++
	}
	if dots == 0 || label < 2 {
		return 0
	}
	for k := n - label; k < n; k++ { // a top-level domain of letters
		if !isLower(s[k]) && !isUpper(s[k]) {
			return 0
		}
	}
	return n
}

// beforePort returns addr of "addr:port" (port a number up to 65535, addr
// non-empty; an IPv6 address in brackets).
func beforePort(s string) (addr string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 || !isPort(s[i+1:]) {
		return "", false
	}
	return strings.Trim(s[:i], "[]"), true
}

func isPort(s string) bool {
	if !allDigits(s) || len(s) > 5 {
		return false
	}
	p, _ := strconv.Atoi(s)
	return p <= 65535
}

func isIPv4(s string) bool { return s != "" && ipv4Len(s) == len(s) }

func isIPv6(s string) bool {
	if strings.Count(s, ":") < 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) && s[i] != ':' && s[i] != '.' {
			return false
		}
	}
	return true
}

// isHost: a hostname (letters, digits, dots, hyphens; not all digits), as
// found before a port.
func isHost(s string) bool {
	if s == "" || allDigits(strings.ReplaceAll(s, ".", "")) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// isDuration: Go-style durations, one or more number+unit pairs (250ms,
// 1m30s, 2.5s, 100µs).
func isDuration(s string) bool {
	units := []string{"ns", "us", "µs", "ms", "s", "m", "h"}
	n := 0
	for len(s) > 0 {
		j := 0
		for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
			j++
		}
		if j == 0 {
			return false
		}
		s = s[j:]
		matched := false
		for _, u := range units {
			if strings.HasPrefix(s, u) {
				s, matched = s[len(u):], true
				break
			}
		}
		if !matched {
			return false
		}
		n++
	}
	return n > 0
}
