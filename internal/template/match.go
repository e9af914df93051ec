package template

import "strings"

// kind is what a token is for matching: a pinned token must be equal for a
// message to join a template.
type kind uint8

const pinned kind = 1

func kindsOf(tokens []string) []kind {
	kinds := make([]kind, len(tokens))
	for i, t := range tokens {
		kinds[i] = kindOf(t)
	}
	return kinds
}

// kindOf tells what separates problems (pinned) from what may vary.
// Pinned, because Normalize already replaced what varies and left these on
// purpose, or they are the message's own words:
//   - a token with a digit: after Normalize only status codes, SQLSTATEs
//     and error numbers keep digits;
//   - a quoted name without placeholders: after Normalize only names
//     (constraints, tables, topics) stay quoted;
//   - a word of two or more letters, in any case: the sentence ("of
//     undefined" is not "of null", "was declined" not "has expired"), a
//     code (ECONNREFUSED is not ETIMEDOUT, DeadlineExceeded, (Forbidden)
//     is not (Conflict)); random mixed-case ids were masked before;
//   - an upper-case identifier with underscores (_MSG_TIMED_OUT,
//     NOT_LEADER_FOR_PARTITION).
//
// Anything else (a single character, dotted, hyphenated or snake_case
// names, paths, tokens with placeholders) is a name or an id and may vary,
// which is what the mining learns. Letting one word vary too would group
// names written as words ("from SHIPPED to PAID", a user) but merge codes
// that are words; on the corpus it gained 1 point of GA and risked
// mixing, and a mixed incident hides a problem where a split one only
// shows two rows an operator can merge.
func kindOf(t string) kind {
	if t == Wildcard || t == "" {
		return 0
	}
	if q := t[0]; isQuote(q) && len(t) >= 3 && t[len(t)-1] == q {
		if strings.IndexByte(t, '<') >= 0 {
			return 0
		}
		return pinned
	}
	letters, lower, underscores := 0, 0, 0
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case isDigit(c):
			return pinned
		case isLetter(c):
			letters++
			if isLower(c) {
				lower++
			}
		case c == '_':
			underscores++
		case c == '\'' && i > 0: // can't
		default:
			return 0 // not a word: a name or an id
		}
	}
	switch {
	case letters < 2:
		return 0
	case underscores == 0:
		return pinned
	case lower == 0:
		return pinned
	}
	return 0
}

// descentKey is the child a token descends to: Wildcard for a token that
// mixes text with a placeholder (a half-recognized id: "x<n>k<n>p",
// "https://<host>/v<n>/orders/<uuid>"), the token itself otherwise. Drain
// sends tokens with digits to the wildcard; after Normalize, digits mean
// codes, which tell problems apart and descend by themselves.
func descentKey(t string) string {
	open := -1
	for i := 0; i < len(t); i++ {
		if t[i] == '<' {
			open = i
			continue
		}
		if t[i] == '>' && open >= 0 {
			open = -2 // a placeholder seen
		}
	}
	if open == -2 && !onlyPlaceholders(t) {
		return Wildcard
	}
	return t
}

// onlyPlaceholders: "<n>", "<ip>:<port>", "(<v>)": placeholders and
// punctuation, no text of their own.
func onlyPlaceholders(t string) bool {
	in := false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '<':
			in = true
		case c == '>':
			in = false
		case !in && isAlnum(c):
			return false
		}
	}
	return true
}

// similarity is Drain's: the positions where the template equals the
// message over all positions, wildcards not counted; and the number of
// wildcards, for ties. ok is false when a pinned token differs.
func similarity(c *cluster, tokens []string, kinds []kind) (sim float64, wild int, ok bool) {
	if len(tokens) == 0 {
		return 1, 0, true
	}
	equal := 0
	for i, t := range c.tokens {
		switch {
		case t == Wildcard:
			wild++
		case t == tokens[i]:
			equal++
		case c.kinds[i]&pinned != 0 || kinds[i]&pinned != 0:
			return 0, 0, false
		}
	}
	return float64(equal) / float64(len(tokens)), wild, true
}
