package main

// Reading the README's tour for TestREADMETour: its fenced blocks, its
// commands, and whether what it shows as output covers what a run printed.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// block is a fenced block of the README: its language and text.
type block struct {
	lang string
	text string
}

// tourBlocks returns the fenced blocks of the README's section title, in
// order.
func tourBlocks(t *testing.T, readme, title string) []block {
	t.Helper()
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", readme, "## "+title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []block
	var cur *block
	for line := range strings.Lines(section) {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line
		}
	}
	if cur != nil {
		t.Fatalf("%s: the section %q has a fenced block that never ends", readme, title)
	}
	return blocks
}

// commands splits a shell block into its commands: a line, with the lines
// a trailing backslash continues (kept as written, for bash to join).
// Blank lines and comment lines are no commands.
func commands(sh string) []string {
	var cmds []string
	var cur strings.Builder
	for line := range strings.Lines(sh) {
		if cur.Len() == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		cur.WriteString(line)
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), "\\") {
			cmds = append(cmds, strings.TrimRight(cur.String(), "\n"))
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		cmds = append(cmds, strings.TrimRight(cur.String(), "\n"))
	}
	return cmds
}

// trailingComment is the comment that ends a command (what follows a # that
// starts a word outside quotes), trimmed; "" when there is none.
func trailingComment(cmd string) string {
	var quote rune
	prev := ' '
	for i, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(cmd[i+1:])
		}
		prev = r
	}
	return ""
}

// shownOutput is the output a trailing comment shows, when it shows one:
// a JSON value such as "unparseable". A comment that describes ("merged
// policy + delay table") shows none.
func shownOutput(comment string) (string, bool) {
	if comment == "" || !strings.ContainsAny(comment[:1], `"{[`) {
		return "", false
	}
	return comment, true
}

// textCovers reports whether a run's output is what a ```text block shows,
// … standing for any text (an id, a time) in it.
func textCovers(out, shown string) error {
	parts := strings.Split(strings.TrimSpace(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`^` + strings.Join(parts, `.*?`) + `$`)
	if !re.MatchString(strings.TrimSpace(out)) {
		return fmt.Errorf("the README shows\n%s\nbut it printed\n%s", shown, out)
	}
	return nil
}

// jsonCovers reports whether a run's JSON output has everything a ```json
// block shows: every key shown, with the value shown; … elides the rest of
// an object (a bare …) or stands for any text in a string ("dial tcp …").
// Arrays shown have as many elements as printed.
func jsonCovers(out, shown string) error {
	var got, want any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		return fmt.Errorf("not JSON: %v:\n%s", err, out)
	}
	if err := json.Unmarshal(dropElisions(shown), &want); err != nil {
		return fmt.Errorf("the README's JSON, with its bare … taken out, is not JSON: %v:\n%s", err, dropElisions(shown))
	}
	return covers(got, want, "")
}

// dropElisions takes the bare … (outside strings) out of shown JSON, with
// the comma that separates it from its neighbour.
func dropElisions(shown string) []byte {
	var out bytes.Buffer
	inString, escaped := false, false
	for _, r := range shown {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				inString = false
			}
		case r == '"':
			inString = true
		case r == '…':
			b := bytes.TrimRight(out.Bytes(), " \n")
			if bytes.HasSuffix(b, []byte(",")) {
				b = b[:len(b)-1]
			}
			out.Truncate(len(b))
			continue
		}
		out.WriteRune(r)
	}
	// A bare … first in an object leaves its comma after it: {…, "a": 1}.
	return regexp.MustCompile(`([{\[])\s*,`).ReplaceAll(out.Bytes(), []byte("$1"))
}

func covers(got, want any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: the README shows an object, it printed %v", orRoot(path), got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: the README shows it, it is not printed", path, k)
			}
			if err := covers(gv, wv, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: the README shows %d elements, it printed %v", orRoot(path), len(w), got)
		}
		for i := range w {
			if err := covers(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case string:
		if g, ok := got.(string); !ok || g != w && (!strings.Contains(w, "…") || textCovers(g, w) != nil) {
			return fmt.Errorf("%s: the README shows %q, it printed %v", orRoot(path), w, got)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s: the README shows %v, it printed %v", orRoot(path), want, got)
		}
	}
	return nil
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// Reading the README: blocks, commands with their continuation lines and
// comments, and shown output against printed output, elisions included.
func TestTourReading(t *testing.T) {
	cmds := commands("make run\n\n# a comment\necho a \\\n  b   # \"a b\"\ncurl -s 'x#y' | jq   # what it is\n")
	if len(cmds) != 3 || cmds[1] != "echo a \\\n  b   # \"a b\"" {
		t.Fatalf("commands: %q", cmds)
	}
	for cmd, want := range map[string]string{cmds[0]: "", cmds[1]: `"a b"`, cmds[2]: "what it is"} {
		if got := trailingComment(cmd); got != want {
			t.Errorf("trailingComment(%q) = %q, want %q", cmd, got, want)
		}
	}
	if _, ok := shownOutput("what it is"); ok {
		t.Error("a describing comment taken for output")
	}
	shown := `{"items": [{"id": "…", "n": 1, "msg": "dial tcp …", …}], …, "page": {"total": 1}}`
	if err := jsonCovers(`{"items":[{"id":"0193","n":1,"msg":"dial tcp 10.0.0.5:5432","more":true}],"x":2,"page":{"total":1}}`, shown); err != nil {
		t.Errorf("a covered output: %v", err)
	}
	for _, out := range []string{
		`{"items":[{"id":"0193","n":2,"msg":"dial tcp 10.0.0.5:5432"}],"page":{"total":1}}`,
		`{"items":[{"id":"0193","n":1,"msg":"refused"}],"page":{"total":1}}`,
		`{"items":[{"id":"0193","n":1,"msg":"dial tcp x"},{}],"page":{"total":1}}`,
		`{"items":[{"n":1,"msg":"dial tcp x"}],"page":{"total":1}}`,
	} {
		if err := jsonCovers(out, shown); err == nil {
			t.Errorf("%s is not what the README shows, and passed", out)
		}
	}
	if err := jsonCovers(`{"v":"x\"yz","w":1}`, `{"v": "x\"…", …}`); err != nil {
		t.Errorf("an escaped quote before …: %v", err)
	}
	if err := jsonCovers(`{"v":" a"}`, `{"v": "a"}`); err == nil {
		t.Error("a string shown without … is compared as it is")
	}
	if err := textCovers("order-17 redrive.id=01a2,redrive.attempt=2\n", "order-17 redrive.id=…,redrive.attempt=2"); err != nil {
		t.Error(err)
	}
	if err := textCovers("order-17 redrive.id=01a2,redrive.attempt=3", "order-17 redrive.id=…,redrive.attempt=2"); err == nil {
		t.Error("attempt 3 passed for 2")
	}
}
