// Package fingerprint groups failures: two failures with the same error type
// and the same message up to its variable parts (ids, numbers, hosts, times)
// share a fingerprint, so 40,000 dead letters show as the 3 problems they are.
//
// Normalize is the one place the rules live. It reads the message word by
// word (a word is a run of anything but whitespace) and replaces, in this
// order of precedence:
//
//   - quoted strings ("…", '…', `…`)                     → <str>
//   - URLs: scheme kept, host and port replaced, path normalized → https://<host>/v<n>/orders/<n>
//   - UUIDs                                               → <uuid>
//   - timestamps and dates (2026-11-24T20:18:21Z, 20:18:21) → <time>
//   - IPv4 and IPv6 addresses, with their port           → <ip>:<port>
//   - host:port                                           → <host>:<port>
//   - durations (250ms, 1m30s, 2.5s)                      → <duration>
//   - hex ids (0x7f3a…, or 8+ hex digits with a digit and a letter) → <hex>
//   - any other run of digits, inside words too           → <n>
//
// Error codes stay: a five-character SQLSTATE after "SQLSTATE" and a number
// after "status" or "code" (HTTP statuses, Kafka error codes) tell different
// problems apart. Whitespace collapses to single spaces. A backtrace adds its
// top frames with line numbers and offsets removed (for a recovered Go panic,
// the top frames below the runtime's panic call: see TopFrames).
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Frames is how many top backtrace frames take part in a fingerprint.
const Frames = 3

// Of returns the fingerprint of a failure: 16 hex characters of a hash of
// the error type, the normalized message and the top backtrace frames.
func Of(errorType, message string, backtrace []string) string {
	h := sha256.New()
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
// line numbers, columns and program-counter offsets: "\t/app/handler.go:42
// +0x1d" becomes "/app/handler.go", "at com.acme.X.run(X.java:42)" becomes
// "at com.acme.X.run(X.java)".
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
		out = append(out, stripLineNumbers(f))
		if len(out) == Frames {
			break
		}
	}
	return out
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

// Normalize returns message with its variable parts replaced by placeholders
// (see the package documentation for the rules).
func Normalize(message string) string {
	var b strings.Builder
	b.Grow(len(message))
	prev := "" // the previous word, for the codes that stay
	for i := 0; i < len(message); {
		c := message[i]
		if isSpace(c) {
			for i < len(message) && isSpace(message[i]) {
				i++
			}
			if b.Len() > 0 && i < len(message) {
				b.WriteByte(' ')
			}
			continue
		}
		if c == '"' || c == '\'' || c == '`' {
			if end := strings.IndexByte(message[i+1:], c); end >= 0 {
				b.WriteString("<str>")
				i += end + 2
				prev = ""
				continue
			}
		}
		j := i
		for j < len(message) && !isSpace(message[j]) && !isQuote(message[j]) {
			j++
		}
		if j == i { // an unmatched quote
			b.WriteByte(c)
			i++
			continue
		}
		word := message[i:j]
		normalizeWord(&b, word, prev)
		prev = codeWord(word)
		i = j
	}
	return b.String()
}

// codeWord returns "sqlstate", "status" or "code" when word is one of them
// (any case, with punctuation around it), else "".
func codeWord(word string) string {
	w := strings.TrimRight(strings.TrimLeft(word, "([{<"), ":=,;")
	for _, k := range [...]string{"sqlstate", "status", "code"} {
		if strings.EqualFold(w, k) {
			return k
		}
	}
	return ""
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
	case prev == "sqlstate" && len(core) == 5:
		b.WriteString(core)
	case (prev == "status" || prev == "code") && allDigits(core):
		b.WriteString(core)
	default:
		normalizeCore(b, core)
	}
	b.WriteString(word[trail:])
}

// normalizeCore writes a word stripped of surrounding punctuation,
// classified.
func normalizeCore(b *strings.Builder, w string) {
	if scheme, rest, ok := strings.Cut(w, "://"); ok && isWordLike(scheme) {
		host, path, hasPath := strings.Cut(rest, "/")
		b.WriteString(scheme)
		if strings.Contains(host, "@") {
			b.WriteString("://<user>@<host>")
		} else {
			b.WriteString("://<host>")
		}
		if hasPath {
			b.WriteByte('/')
			replaceParts(b, path)
		}
		return
	}
	switch {
	case isUUID(w):
		b.WriteString("<uuid>")
		return
	case isTimestamp(w):
		b.WriteString("<time>")
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
	default:
		replaceParts(b, w)
	}
}

// replaceParts writes w with the UUIDs, hex ids and digit runs inside it
// replaced ("order-123" → "order-<n>", "v1/orders/9f1c…" → "v<n>/orders/<uuid>").
func replaceParts(b *strings.Builder, w string) {
	for i := 0; i < len(w); {
		// Segments between separators may be whole ids.
		j := i
		for j < len(w) && !isSeparator(w[j]) {
			j++
		}
		seg := w[i:j]
		switch {
		case seg == "":
		case isUUID(seg):
			b.WriteString("<uuid>")
		case isHexID(seg):
			b.WriteString("<hex>")
		default:
			writeDigitsReplaced(b, seg)
		}
		if j < len(w) {
			b.WriteByte(w[j])
			j++
		}
		i = j
	}
}

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
func isHex(c byte) bool       { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isSeparator(c byte) bool { return strings.IndexByte("/-_.=:@,?&#+", c) >= 0 }

func isWordLike(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '+' || c == '-' || c == '.') {
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
// one decimal digit and one letter (git SHAs, trace ids, object ids).
func isHexID(s string) bool {
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		for i := 2; i < len(s); i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	}
	if len(s) < 8 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			digit = true
		case isHex(c):
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

// isTimestamp: a date (2026-11-24, optionally with a time: T or _ and
// hh:mm[:ss[.frac]][Z|±hh:mm]), or a time of day hh:mm:ss[.frac].
func isTimestamp(s string) bool {
	if len(s) >= 10 && allDigits(s[:4]) && s[4] == '-' && allDigits(s[5:7]) && s[7] == '-' && allDigits(s[8:10]) {
		return true
	}
	return len(s) >= 8 && allDigits(s[:2]) && s[2] == ':' && allDigits(s[3:5]) && s[5] == ':' && allDigits(s[6:8])
}

// beforePort returns addr of "addr:port" (port all digits, addr non-empty;
// an IPv6 address in brackets).
func beforePort(s string) (addr string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 || !allDigits(s[i+1:]) {
		return "", false
	}
	return strings.Trim(s[:i], "[]"), true
}

func isIPv4(s string) bool {
	parts, run := 1, 0
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(s[i]):
			if run++; run > 3 {
				return false
			}
		case s[i] == '.' && run > 0:
			parts, run = parts+1, 0
		default:
			return false
		}
	}
	return parts == 4 && run > 0
}

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
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '.' || c == '-') {
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
