package template

import "strings"

// mask replaces, inside one token, the identifiers that fingerprint's rules
// leave (wholly or partly) literal, so that they neither steer the tree
// descent nor cost similarity. Drain masks what varies before it descends;
// Normalize does most of that, and these are the kinds it misses on real
// data (issue 46), each cheap to recognize:
//
//   - Kubernetes pod names: name-<suffix> and name-<replicaset hash>-<suffix>,
//     the suffix 5 characters and the hash 6 to 10 of the alphabet
//     Kubernetes draws them from (no vowels; digits 2 and 4-9) → name-<pod>.
//     Normalize turns "inventory-7f9c4" into "inventory-<n>f<n>c<n>", a
//     different token for every pod.
//   - Prefixed random ids, Stripe's style (ch_, req_, cus_, pi_, sk_live_):
//     2 to 5 lowercase letters, "_", and 8 or more letters and digits that
//     read as random → prefix_<id>. Normalize keeps "req_EtdTfodORmyyrx"
//     (no digits) and half-masks "ch_3NqwAQMW2WWEWFFOevlJUDJH".
//   - Mixed-case random strings of 12 or more letters and digits (base62
//     and base64 ids without a prefix) → <id>, told from CamelCase names
//     by having two of: few vowels, a run of four consonants, a digit
//     between letters.
//   - What Normalize left as digits between letters, twice or more
//     ("x<n>k<n>p", "<n>O<n>TN<n>T": a random id with digits it did not
//     recognize) → <id>.
//   - IPv4 addresses with their port, and Go durations (30s, 1.5ms, 1m30s),
//     when the text was not normalized → <ip>:<port>, <duration>.
//
// Everything else varying is left to the mining, which learns it.
// Segments of a token (between / ? & # @ : = and quotes) are masked one by
// one, so an id inside a URL or after "key=" is found too.
func mask(tok string) string {
	if !maybeMasked(tok) {
		return tok
	}
	var b strings.Builder
	changed := false
	prevIP := false
	start := 0
	for i := 0; i <= len(tok); i++ {
		if i < len(tok) && !isSegmentSep(tok[i]) {
			continue
		}
		seg := tok[start:i]
		out := seg
		switch {
		case seg == "":
		case prevIP && start > 0 && tok[start-1] == ':' && allDigits(seg) && len(seg) <= 5:
			out = "<port>"
		case isIPv4(seg):
			out = "<ip>"
		default:
			out = maskSegment(seg)
		}
		prevIP = out == "<ip>"
		if out != seg && !changed {
			changed = true
			b.Grow(len(tok))
			b.WriteString(tok[:start])
		}
		if changed {
			b.WriteString(out)
			if i < len(tok) {
				b.WriteByte(tok[i])
			}
		}
		start = i + 1
	}
	if !changed {
		return tok
	}
	return b.String()
}

// maybeMasked: a token that could hold anything mask replaces. Most tokens
// are short words and skip the work.
func maybeMasked(tok string) bool {
	if len(tok) >= 12 {
		return true
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; isDigit(c) || c == '<' || c == '-' || c == '_' {
			return true
		}
	}
	return false
}

func isSegmentSep(c byte) bool {
	switch c {
	case '/', '?', '&', '#', '@', ':', '=', '"', '\'', '`':
		return true
	}
	return false
}

// maskSegment masks one segment: a pod name or a prefixed id as a whole,
// else each part between - _ and . on its own.
func maskSegment(seg string) string {
	if isDuration(seg) {
		return "<duration>"
	}
	if m, ok := maskPod(seg); ok {
		return m
	}
	if m, ok := maskPrefixedID(seg); ok {
		return m
	}
	var b strings.Builder
	changed := false
	start := 0
	for i := 0; i <= len(seg); i++ {
		if i < len(seg) && seg[i] != '-' && seg[i] != '_' && seg[i] != '.' {
			continue
		}
		part := seg[start:i]
		out := part
		if isRandomPart(part) {
			out = "<id>"
		}
		if out != part && !changed {
			changed = true
			b.WriteString(seg[:start])
		}
		if changed {
			b.WriteString(out)
			if i < len(seg) {
				b.WriteByte(seg[i])
			}
		}
		start = i + 1
	}
	if !changed {
		return seg
	}
	return b.String()
}

// shape describes a part made of letters, digits and Normalize's "<n>"
// placeholders: its length with each "<n>" counted as one character, and
// what it holds. ok is false when it holds anything else.
type shape struct {
	length, letters, digits, placeholders int
	upper, lower, ok                      bool
	k8s                                   bool // only characters of Kubernetes' random alphabet
	compact                               string
}

func shapeOf(p string) shape {
	sh := shape{ok: true, k8s: true}
	var b []byte
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case strings.HasPrefix(p[i:], "<n>"):
			sh.placeholders++
			b = append(b, '0')
			i += 3
			continue
		case isDigit(c):
			sh.digits++
			sh.k8s = sh.k8s && c != '0' && c != '1' && c != '3'
		case isLower(c):
			sh.letters++
			sh.lower = true
			sh.k8s = sh.k8s && strings.IndexByte("aeiouy", c) < 0
		case isUpper(c):
			sh.letters++
			sh.upper = true
			sh.k8s = false
		default:
			return shape{}
		}
		b = append(b, c)
		i++
	}
	sh.length = len(b)
	sh.compact = string(b)
	return sh
}

// maskPod recognizes name-<suffix> and name-<hash>-<suffix>.
func maskPod(seg string) (string, bool) {
	last := strings.LastIndexByte(seg, '-')
	if last <= 0 || !isPodSuffix(shapeOf(seg[last+1:])) {
		return "", false
	}
	name := seg[:last]
	if prev := strings.LastIndexByte(name, '-'); prev > 0 && isReplicaSetHash(name[prev+1:]) {
		name = name[:prev]
	}
	if !isLetter(name[0]) {
		return "", false
	}
	return name + "-<pod>", true
}

// isPodSuffix: 5 characters of the alphabet, or 3 to 5 written with "<n>"
// (each standing for one or more digits), with a letter. Not 2: "v<n>" is
// a version.
func isPodSuffix(sh shape) bool {
	if !sh.ok || !sh.k8s || sh.letters == 0 {
		return false
	}
	if sh.placeholders == 0 {
		return sh.length == 5
	}
	return sh.length >= 3 && sh.length <= 5
}

func isReplicaSetHash(p string) bool {
	if p == "<hex>" {
		return true
	}
	sh := shapeOf(p)
	if !sh.ok || !sh.k8s || sh.letters == 0 {
		return false
	}
	if sh.placeholders == 0 {
		return sh.length >= 6 && sh.length <= 10
	}
	return sh.length >= 3 && sh.length <= 10
}

// maskPrefixedID recognizes prefix_<random> and prefix_live_<random>.
func maskPrefixedID(seg string) (string, bool) {
	p := 0
	for p < len(seg) && isLower(seg[p]) {
		p++
	}
	if p < 2 || p > 5 || p == len(seg) || seg[p] != '_' {
		return "", false
	}
	head := p + 1
	for _, mode := range [...]string{"live_", "test_"} {
		if strings.HasPrefix(seg[head:], mode) {
			head += len(mode)
		}
	}
	sh := shapeOf(seg[head:])
	if !sh.ok || sh.length < 8 || sh.letters == 0 {
		return "", false
	}
	random := isRandomMixed(sh)
	if sh.digits+sh.placeholders > 0 {
		// Digits in a random id fall anywhere, and Stripe's are mixed case;
		// a name ends in its number (events_2024).
		random = sh.upper || interleaved(sh.compact)
	}
	if !random {
		return "", false
	}
	return seg[:head] + "<id>", true
}

// isRandomPart recognizes a random id between separators.
func isRandomPart(p string) bool {
	if len(p) < 5 {
		return false
	}
	sh := shapeOf(p)
	if !sh.ok || sh.letters == 0 {
		return false
	}
	if sh.placeholders >= 2 && interleaved(sh.compact) {
		return true
	}
	return sh.length >= 12 && isRandomMixed(sh)
}

// interleaved: a digit between two letters somewhere.
func interleaved(s string) bool {
	for i := 1; i+1 < len(s); i++ {
		if isDigit(s[i]) && isLetter(s[i-1]) && isLetter(s[i+1]) || isLetter(s[i]) && isDigit(s[i-1]) && isDigit(s[i+1]) {
			return true
		}
	}
	return false
}

// isRandomMixed tells a random mixed-case string from a CamelCase name
// (ProvisionedThroughputExceededException, HTTPSConnectionPool): a random
// base62 string has few vowels (about 1 letter in 5), runs of consonants
// across case changes and digits between letters; a name has at most one
// of these.
func isRandomMixed(sh shape) bool {
	if !sh.upper || !sh.lower {
		return false
	}
	vowels, run, longest := 0, 0, 0
	s := sh.compact
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		switch {
		case !isLetter(s[i]):
			run = 0
		case strings.IndexByte("aeiou", c) >= 0:
			vowels++
			run = 0
		default:
			run++
			longest = max(longest, run)
		}
	}
	signals := 0
	if vowels*4 < sh.letters {
		signals++
	}
	if longest >= 4 {
		signals++
	}
	if interleaved(s) {
		signals++
	}
	return signals >= 2
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

// isIPv4: four dot-separated numbers of 1 to 3 digits.
func isIPv4(s string) bool {
	parts := 0
	for len(s) > 0 {
		n := 0
		for n < len(s) && isDigit(s[n]) {
			n++
		}
		if n == 0 || n > 3 {
			return false
		}
		parts++
		s = s[n:]
		if s == "" {
			break
		}
		if s[0] != '.' {
			return false
		}
		s = s[1:]
		if s == "" {
			return false
		}
	}
	return parts == 4
}

// isDuration: a Go duration, number+unit pairs (30s, 1.5ms, 1m30s, 100µs).
func isDuration(s string) bool {
	if s == "" || !isDigit(s[0]) {
		return false
	}
	for len(s) > 0 {
		n := 0
		for n < len(s) && (isDigit(s[n]) || s[n] == '.') {
			n++
		}
		if n == 0 {
			return false
		}
		s = s[n:]
		unit := 0
		for _, u := range [...]string{"ns", "us", "µs", "ms", "s", "m", "h"} {
			if strings.HasPrefix(s, u) {
				unit = len(u)
				break
			}
		}
		if unit == 0 {
			return false
		}
		s = s[unit:]
	}
	return true
}
