package template

import "unicode/utf8"

// Bounds of Tokenize: a message is data from anyone, so the tokenizer reads
// at most maxInputBytes of it, emits at most MaxTokensLimit tokens and cuts
// a token at maxTokenizeBytes. Messages that differ only beyond these
// bounds share their tokens, which is what grouping wants anyway.
const (
	maxInputBytes    = 16 << 10
	MaxTokensLimit   = 256
	maxTokenizeBytes = 256
)

// Tokenize splits a normalized message (fingerprint.Normalize's output)
// into the tokens the miner compares, and masks the identifiers the
// normalizing rules miss (see mask).
//
// Tokens are separated by whitespace and by the punctuation that separates
// fields rather than belongs to them: , ; | ( ) [ ] { } and quotes. A
// "key=value" gives "key=" and "value", so that a value varies without the
// key. A quoted run without spaces (`"orders_pkey"`) stays one token with
// its quotes: Normalize keeps quotes only around names (constraints, tables,
// topics), and the miner treats such a token as part of the problem's
// identity (see kindOf). Trailing : . ! ? go, and so do rulers ("-----").
func Tokenize(normalized string) []string {
	s := normalized
	if len(s) > maxInputBytes {
		s = s[:maxInputBytes]
	}
	tokens := make([]string, 0, 16)
	emit := func(tok string) bool {
		tok = trimTrailing(tok)
		if !meaningful(tok) {
			return true
		}
		tok = mask(tok)
		if len(tok) > maxTokenizeBytes {
			tok = cutUTF8(tok, maxTokenizeBytes)
		}
		tokens = append(tokens, tok)
		return len(tokens) < MaxTokensLimit
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(c) || isFieldSep(c):
			i++
			continue
		case isQuote(c):
			if end := quotedEnd(s, i); end > 0 {
				if !emit(s[i : end+1]) {
					return tokens
				}
				i = end + 1
				continue
			}
			i++ // a quote that opens a spaced string or stands alone
			continue
		}
		j := i
		for j < len(s) && !isSpace(s[j]) && !isFieldSep(s[j]) && !(isQuote(s[j]) && !isApostrophe(s, j)) {
			j++
		}
		word := s[i:j]
		i = j
		// key=value: the key, with its "=", is a token of its own.
		if k := keyEnd(word); k > 0 {
			if !emit(word[:k+1]) {
				return tokens
			}
			word = word[k+1:]
		}
		if !emit(word) {
			return tokens
		}
	}
	return tokens
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

func isFieldSep(c byte) bool {
	switch c {
	case ',', ';', '|', '(', ')', '[', ']', '{', '}':
		return true
	}
	return false
}

// isApostrophe: a quote between two letters or digits (doesn't, can't).
func isApostrophe(s string, j int) bool {
	return s[j] == '\'' && j > 0 && j+1 < len(s) && isAlnum(s[j-1]) && isAlnum(s[j+1])
}

// quotedEnd returns the index of the quote closing the one at s[i] when
// the quoted run holds no space and no field separator and is followed by
// the end, a space or punctuation; else -1.
func quotedEnd(s string, i int) int {
	q := s[i]
	for k := i + 1; k < len(s) && k-i <= maxTokenizeBytes; k++ {
		c := s[k]
		switch {
		case c == q:
			if k == i+1 {
				return -1
			}
			if k+1 == len(s) || isSpace(s[k+1]) || isFieldSep(s[k+1]) || isTrailing(s[k+1]) || s[k+1] == '=' {
				return k
			}
			return -1
		case isSpace(c) || isFieldSep(c):
			return -1
		}
	}
	return -1
}

// keyEnd returns the index of the "=" ending the key of a key=value word
// (a key of letters, digits, _ - and .), or -1.
func keyEnd(w string) int {
	for k := 0; k < len(w); k++ {
		c := w[k]
		switch {
		case c == '=':
			if k == 0 || k == len(w)-1 {
				return -1
			}
			return k
		case isAlnum(c) || c == '_' || c == '-' || c == '.':
		default:
			return -1
		}
	}
	return -1
}

func isTrailing(c byte) bool { return c == ':' || c == '.' || c == '!' || c == '?' }

func trimTrailing(tok string) string {
	for len(tok) > 0 && isTrailing(tok[len(tok)-1]) {
		tok = tok[:len(tok)-1]
	}
	return tok
}

// meaningful: a token with a letter, a digit, a placeholder ("<n>",
// "<*>") or any non-ASCII character, or punctuation of up to 3 characters
// ("<" in "Unexpected token < in JSON", "->"); not a ruler ("-----").
func meaningful(tok string) bool {
	if tok != "" && len(tok) <= 3 {
		return true
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if isAlnum(c) || c >= utf8.RuneSelf || c == '<' && i+1 < len(tok) && (isLower(tok[i+1]) || tok[i+1] == '*') {
			return true
		}
	}
	return false
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLetter(c byte) bool { return isLower(c) || isUpper(c) }
func isAlnum(c byte) bool  { return isDigit(c) || isLetter(c) }
