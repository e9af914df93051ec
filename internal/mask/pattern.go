package mask

import (
	"bytes"
	"fmt"
	"regexp"
)

// Pattern finds what to mask in text: a built-in (Builtin) or a custom
// regular expression (Compile).
type Pattern struct {
	// Name is the built-in's name or the custom pattern's.
	Name string
	// Expr is the regular expression (RE2 syntax) as written; empty for a
	// built-in that is not one.
	Expr string
	re   *regexp.Regexp
	// spans, when set, finds the ranges to mask instead of re.
	spans func(b []byte) [][2]int
}

// Builtins are the names of the built-in patterns, in the order the docs
// list them.
var Builtins = []string{"card_number", "email"}

var (
	// digitRun is a run of digit groups separated by single spaces or
	// dashes: where a card number may be.
	digitRun = regexp.MustCompile(`[0-9]+(?:[ -][0-9]+)*`)
	emailRE  = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`)
)

// Builtin returns the built-in pattern of that name:
//
//   - card_number: 13 to 19 digits, written together or in groups
//     separated by single spaces or dashes, that pass the Luhn check (a
//     16-digit order number that fails it is left alone);
//   - email: an address like name@example.com.
func Builtin(name string) (*Pattern, bool) {
	switch name {
	case "card_number":
		return &Pattern{Name: name, spans: cardSpans}, true
	case "email":
		return &Pattern{Name: name, Expr: emailRE.String(), re: emailRE}, true
	}
	return nil, false
}

// MaxExprBytes bounds a custom pattern's regular expression.
const MaxExprBytes = 1024

// Compile builds a custom pattern: a regular expression in RE2 syntax
// (linear time whatever the input). It must not match the empty string:
// such a pattern would mask between every two characters.
func Compile(name, expr string) (*Pattern, error) {
	if len(expr) > MaxExprBytes {
		return nil, fmt.Errorf("must be at most %d bytes, got %d", MaxExprBytes, len(expr))
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("not a valid regular expression (RE2 syntax): %w", err)
	}
	if re.Match(nil) {
		return nil, fmt.Errorf("%q matches the empty string: it would mask between every two characters", expr)
	}
	return &Pattern{Name: name, Expr: expr, re: re}, nil
}

// find reports whether p finds something in b.
func (p *Pattern) find(b []byte) bool {
	if p.spans != nil {
		return len(p.spans(b)) > 0
	}
	return p.re.Match(b)
}

// replace returns b with what p finds replaced by Marker (b itself when
// it finds nothing).
func (p *Pattern) replace(b []byte) []byte {
	var spans [][2]int
	if p.spans != nil {
		spans = p.spans(b)
	} else {
		for _, m := range p.re.FindAllIndex(b, -1) {
			if m[1] > m[0] {
				spans = append(spans, [2]int{m[0], m[1]})
			}
		}
	}
	if len(spans) == 0 {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b))
	last := 0
	for _, s := range spans {
		out.Write(b[last:s[0]])
		out.WriteString(Marker)
		last = s[1]
	}
	out.Write(b[last:])
	return out.Bytes()
}

// cardSpans finds the card numbers in b: within each run of digit groups,
// the longest sequence of whole groups holding 13 to 19 digits that passes
// the Luhn check, from the left.
func cardSpans(b []byte) [][2]int {
	var out [][2]int
	for _, run := range digitRun.FindAllIndex(b, -1) {
		// The groups of the run: [start, end) of each digit group.
		var groups [][2]int
		for i := run[0]; i < run[1]; {
			j := i
			for j < run[1] && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			groups = append(groups, [2]int{i, j})
			i = j + 1
		}
		for i := 0; i < len(groups); i++ {
			best := -1
			n := 0
			for j := i; j < len(groups); j++ {
				n += groups[j][1] - groups[j][0]
				if n > 19 {
					break
				}
				if n >= 13 && luhn(b, groups[i:j+1]) {
					best = j
				}
			}
			if best >= 0 {
				out = append(out, [2]int{groups[i][0], groups[best][1]})
				i = best
			}
		}
	}
	return out
}

// luhn reports whether the digits of the groups pass the Luhn check.
func luhn(b []byte, groups [][2]int) bool {
	var digits []byte
	for _, g := range groups {
		digits = append(digits, b[g[0]:g[1]]...)
	}
	sum := 0
	for k := range digits {
		v := int(digits[len(digits)-1-k] - '0') // k: the digit's place from the right
		if k%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}
