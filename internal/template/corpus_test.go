package template_test

import (
	"bufio"
	"encoding/base64"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The corpus: messages generated from testdata/families.txt, each family
// one real problem (its label), with the identifiers production varies
// drawn from a seeded generator, so the corpus is large, varied and the
// same on every run. The generated corpora are kept in testdata as well
// (corpus-tuning.tsv, corpus-heldout.tsv, corpus-fresh.tsv) for review and for later steps;
// TestCorpusIsCurrent checks they match the generator (-update rewrites
// them).

var update = flag.Bool("update", false, "rewrite testdata/corpus-*.tsv from the generator")

// The corpora: tuning (seed 1, the "both" families), held-out (seed 2,
// fresh variants of those and the "heldout" families) and fresh (seed 3,
// variants of all of those and the "fresh" families, written after the
// held-out corpus had been scored once).
type corpusKind int

const (
	tuning corpusKind = iota + 1
	heldout
	fresh
)

func (k corpusKind) String() string { return [...]string{"", "tuning", "held-out", "fresh"}[k] }

type family struct {
	label, split, queue, errorType, template string
}

type message struct {
	label, queue, errorType, text string
}

func loadFamilies(t testing.TB) []family {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "families.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var fams []family
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if s == "" || s[0] == '#' {
			continue
		}
		head, ok := strings.CutPrefix(s, "= ")
		fields := strings.Fields(head)
		if !ok || len(fields) != 4 || fields[1] != "both" && fields[1] != "heldout" && fields[1] != "fresh" {
			t.Fatalf("families.txt:%d: want \"= label both|heldout|fresh queue type\", got %q", line, s)
		}
		if !sc.Scan() {
			t.Fatalf("families.txt:%d: family %s has no template", line, fields[0])
		}
		line++
		fams = append(fams, family{fields[0], fields[1], fields[2], fields[3], sc.Text()})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return fams
}

// corpus generates a corpus, its messages in a shuffled order as
// production interleaves failures. A family has 4 to 8 messages in the
// first corpus it is in, fewer in later ones.
func corpus(t testing.TB, kind corpusKind) []message {
	t.Helper()
	seed := uint64(kind)
	var out []message
	for _, f := range loadFamilies(t) {
		first := map[string]corpusKind{"both": tuning, "heldout": heldout, "fresh": fresh}[f.split]
		if first > kind {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(f.label))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		n := 4 + r.IntN(5)
		switch {
		case first < kind && kind == heldout:
			n = 2 + r.IntN(3)
		case first < kind:
			n = 1 + r.IntN(3)
		}
		for range n {
			text, err := fill(r, f.template)
			if err != nil {
				t.Fatalf("family %s: %v", f.label, err)
			}
			out = append(out, message{f.label, f.queue, f.errorType, text})
		}
	}
	r := rand.New(rand.NewPCG(seed, 0))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// fill replaces a template's ${kind} and ${kind:arg} slots and its \n.
func fill(r *rand.Rand, tmpl string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:i])
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed slot in %q", tmpl)
		}
		kind, arg, _ := strings.Cut(tmpl[i+2:i+j], ":")
		v, err := slot(r, kind, arg)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		tmpl = tmpl[i+j+1:]
	}
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(b.String()), nil
}

const (
	k8sAlphabet = "bcdfghjklmnpqrstvwxz2456789"
	base62      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	letters     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	upperDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

var (
	products = []string{"Lamp", "Blue Widget", "Ergonomic Office Chair", "Stainless Steel Water Bottle", "Desk Mat",
		"USB-C Hub", "Wireless Mouse", "Noise Cancelling Headphones", "Espresso Machine Pro Edition", "Notebook"}
	users   = []string{"alice", "bob", "carol", "dmitri", "li.wei", "maria.silva", "j.smith", "ana.souza", "kenji", "o.adeyemi"}
	domains = []string{"example.com", "example.org", "mail.example.co.uk", "acme.io"}
)

func slot(r *rand.Rand, kind, arg string) (string, error) {
	n := 0
	if arg != "" && kind != "choice" && kind != "int" && kind != "float" && kind != "stripe" && kind != "stripe14" {
		var err error
		if n, err = strconv.Atoi(arg); err != nil {
			return "", fmt.Errorf("slot %s: %w", kind, err)
		}
	}
	switch kind {
	case "ip":
		return fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), 1+r.IntN(254)), nil
	case "port":
		return strconv.Itoa(32768 + r.IntN(28232)), nil
	case "pod5":
		return draw(r, k8sAlphabet, 5), nil
	case "podrs":
		return draw(r, k8sAlphabet, 9+r.IntN(2)) + "-" + draw(r, k8sAlphabet, 5), nil
	case "int":
		lo, hi, err := bounds(arg, 1, 99999)
		if err != nil {
			return "", err
		}
		return strconv.FormatInt(lo+r.Int64N(hi-lo+1), 10), nil
	case "float":
		lo, hi, err := fbounds(arg)
		if err != nil {
			return "", err
		}
		return strconv.FormatFloat(lo+r.Float64()*(hi-lo), 'f', 2+r.IntN(8), 64), nil
	case "uuid":
		h := draw(r, "0123456789abcdef", 32)
		return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-" + h[16:20] + "-" + h[20:], nil
	case "hex":
		return draw(r, "0123456789abcdef", n), nil
	case "HEX":
		return draw(r, "0123456789ABCDEF", n), nil
	case "upnum":
		return draw(r, upperDigits, n), nil
	case "b62":
		return draw(r, base62, n), nil
	case "stripe": // ch_3NqwAQMW2WWEWFFOevlJUDJH
		return arg + "_" + string("13"[r.IntN(2)]) + draw(r, base62, 23), nil
	case "stripe14": // req_EtdTfodORmyyrx, cus_NffrFeUfNV2Hib: some without digits
		if r.IntN(2) == 0 {
			return arg + "_" + draw(r, letters, 14), nil
		}
		return arg + "_" + draw(r, base62, 14), nil
	case "email":
		return users[r.IntN(len(users))] + "@" + domains[r.IntN(len(domains))], nil
	case "user":
		return users[r.IntN(len(users))], nil
	case "product":
		return products[r.IntN(len(products))], nil
	case "ts":
		return timestamp(r) + "Z", nil
	case "azts":
		return timestamp(r), nil
	case "pgts":
		return strings.Replace(timestamp(r), "T", " ", 1) + fmt.Sprintf(".%03d+00", r.IntN(1000)), nil
	case "date":
		return timestamp(r)[:10], nil
	case "amzid2":
		b := make([]byte, 56)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return base64.StdEncoding.EncodeToString(b), nil
	case "choice":
		opts := strings.Split(arg, "|")
		return opts[r.IntN(len(opts))], nil
	}
	return "", fmt.Errorf("unknown slot %q", kind)
}

func draw(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func timestamp(r *rand.Rand) string {
	return fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02d", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
}

func bounds(arg string, lo, hi int64) (int64, int64, error) {
	if arg == "" {
		return lo, hi, nil
	}
	a, b, ok := strings.Cut(arg, "-")
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || y < x {
		return 0, 0, fmt.Errorf("int range %q, want lo-hi", arg)
	}
	return x, y, nil
}

func fbounds(arg string) (float64, float64, error) {
	a, b, ok := strings.Cut(arg, "-")
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || y < x {
		return 0, 0, fmt.Errorf("float range %q, want lo-hi", arg)
	}
	return x, y, nil
}

// TestCorpusIsCurrent keeps testdata/corpus-*.tsv equal to what the
// generator makes, and checks the corpus is what the tests claim: several
// hundred messages from many ecosystems.
func TestCorpusIsCurrent(t *testing.T) {
	for _, c := range []struct {
		file string
		kind corpusKind
	}{{"corpus-tuning.tsv", tuning}, {"corpus-heldout.tsv", heldout}, {"corpus-fresh.tsv", fresh}} {
		msgs := corpus(t, c.kind)
		if len(msgs) < 500 {
			t.Errorf("%s: %d messages, want at least 500", c.file, len(msgs))
		}
		var b strings.Builder
		b.WriteString("# generated by corpus_test.go from families.txt (go test -run TestCorpusIsCurrent -update): label, queue, error type, message\n")
		esc := strings.NewReplacer("\\", `\\`, "\n", `\n`, "\t", `\t`)
		for _, m := range msgs {
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", m.label, m.queue, m.errorType, esc.Replace(m.text))
		}
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != b.String() {
			t.Errorf("%s is not what the generator makes (err %v): run go test ./internal/template -run TestCorpusIsCurrent -update", path, err)
		}
	}
	ecosystems := map[string]bool{}
	for _, f := range loadFamilies(t) {
		ecosystems[strings.SplitN(f.label, ".", 2)[0]] = true
	}
	if len(ecosystems) < 15 {
		t.Errorf("%d ecosystems, want at least 15", len(ecosystems))
	}
}
