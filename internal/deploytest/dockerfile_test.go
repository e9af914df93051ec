package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerInstruction is one Dockerfile instruction with continuations joined.
type dockerInstruction struct {
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
	Line int
}

// dockerStage is one FROM and what follows it.
type dockerStage struct {
	Base  string // image, with global ARGs substituted
	Name  string // AS name, "" if none
	Instr []dockerInstruction
}

func (s dockerStage) all(cmd string) []dockerInstruction {
	var out []dockerInstruction
	for _, in := range s.Instr {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s dockerStage) last(cmd string) (dockerInstruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return dockerInstruction{}, false
	}
	return all[len(all)-1], true
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func parseDockerfile(t *testing.T) []dockerStage {
	t.Helper()
	var instrs []dockerInstruction
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(t, "Dockerfile")))
	var cur strings.Builder
	start := 0
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue // comments (also inside continuations) and blank lines
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		instrs = append(instrs, dockerInstruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	globalArgs := map[string]string{}
	var stages []dockerStage
	for _, in := range instrs {
		switch {
		case in.Cmd == "ARG" && len(stages) == 0:
			for _, a := range strings.Fields(in.Args) {
				k, v, _ := strings.Cut(a, "=")
				globalArgs[k] = strings.Trim(v, `"`)
			}
		case in.Cmd == "FROM":
			var fields []string
			for _, f := range strings.Fields(in.Args) {
				if !strings.HasPrefix(f, "--") { // --platform=...
					fields = append(fields, f)
				}
			}
			if len(fields) == 0 {
				t.Fatalf("Dockerfile:%d: FROM without an image", in.Line)
			}
			st := dockerStage{Base: argRef.ReplaceAllStringFunc(fields[0], func(m string) string {
				return globalArgs[argRef.FindStringSubmatch(m)[1]]
			})}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.Name = fields[2]
			}
			stages = append(stages, st)
		case len(stages) == 0:
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.Line, in.Cmd)
		default:
			stages[len(stages)-1].Instr = append(stages[len(stages)-1].Instr, in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s); want a build stage and a small final stage", len(stages))
	}
	return stages
}

// buildStage is the stage that runs `go build`, and that RUN instruction.
func buildStage(t *testing.T, stages []dockerStage) (int, dockerInstruction) {
	t.Helper()
	for i, st := range stages {
		for _, run := range st.all("RUN") {
			if strings.Contains(run.Args, "go build") {
				return i, run
			}
		}
	}
	t.Fatal("Dockerfile: no stage runs `go build`")
	return 0, dockerInstruction{}
}

// execForm parses a JSON-array ENTRYPOINT or CMD.
func execForm(t *testing.T, in dockerInstruction) []string {
	t.Helper()
	var args []string
	if err := json.Unmarshal([]byte(in.Args), &args); err != nil {
		t.Fatalf("Dockerfile:%d: %s %s: use the exec form [\"...\"] so signals reach redrive (no shell in the image)", in.Line, in.Cmd, in.Args)
	}
	return args
}

// dockerEnv collects the ENV instructions of a stage (K=V pairs, or the legacy "K V").
func dockerEnv(st dockerStage) map[string]string {
	env := map[string]string{}
	for _, in := range st.all("ENV") {
		if !strings.Contains(strings.Fields(in.Args)[0], "=") {
			k, v, _ := strings.Cut(in.Args, " ")
			env[k] = strings.TrimSpace(v)
			continue
		}
		for _, kv := range strings.Fields(in.Args) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

// The build image's Go is the one go.mod asks for.
func TestDockerfileGoVersion(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t)
	i, _ := buildStage(t, stages)
	image, tag, _ := strings.Cut(stages[i].Base, ":")
	if image != "golang" && !strings.HasSuffix(image, "/golang") {
		t.Fatalf("build stage image %q is not golang", stages[i].Base)
	}
	want := goDirective(t)
	if m := regexp.MustCompile(`^(\d+\.\d+)`).FindString(tag); m != want {
		t.Errorf("build stage image %q: Go %q, go.mod says go %s", stages[i].Base, m, want)
	}
}

// The binary is built static, reproducible and small, from ./cmd/redrive.
func TestDockerfileBuild(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t)
	i, run := buildStage(t, stages)
	for _, want := range []string{"./cmd/redrive", "-trimpath", "-s -w"} {
		if !strings.Contains(run.Args, want) {
			t.Errorf("Dockerfile:%d: go build lacks %s", run.Line, want)
		}
	}
	if !strings.Contains(run.Args, "CGO_ENABLED=0") && dockerEnv(stages[i])["CGO_ENABLED"] != "0" {
		t.Errorf("Dockerfile:%d: go build without CGO_ENABLED=0: the binary would need libc, which the final image lacks", run.Line)
	}
	if i == len(stages)-1 {
		t.Error("Dockerfile: the final stage is the build stage; copy the binary into a small runtime image")
	}
}

// The final stage runs /redrive serve as a non-root user, with the shipped
// policies, on the default HTTP port.
func TestDockerfileFinalStage(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t)
	bi, run := buildStage(t, stages)
	final := stages[len(stages)-1]

	// The binary: go build -o X, COPY --from=<build> X Y, ENTRYPOINT ["Y"].
	m := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(run.Args)
	if m == nil {
		t.Fatalf("Dockerfile:%d: go build has no -o output path", run.Line)
	}
	built := m[1]
	buildRefs := []string{strconv.Itoa(bi), stages[bi].Name}
	var binary string
	for _, cp := range final.all("COPY") {
		f := strings.Fields(cp.Args)
		from := slices.IndexFunc(f, func(s string) bool { return strings.HasPrefix(s, "--from=") })
		if from < 0 || !slices.Contains(buildRefs, strings.TrimPrefix(f[from], "--from=")) || f[len(f)-2] != built {
			continue
		}
		binary = f[len(f)-1]
		if strings.HasSuffix(binary, "/") {
			binary += path.Base(built)
		}
	}
	if binary == "" {
		t.Fatalf("Dockerfile: the final stage does not COPY --from=%s %s", stages[bi].Name, built)
	}
	ep, ok := final.last("ENTRYPOINT")
	if !ok {
		t.Fatal("Dockerfile: the final stage has no ENTRYPOINT")
	}
	if args := execForm(t, ep); len(args) == 0 || args[0] != binary {
		t.Errorf("Dockerfile:%d: ENTRYPOINT %v does not run the redrive binary %s", ep.Line, args, binary)
	}
	if cmd, ok := final.last("CMD"); !ok || !slices.Equal(execForm(t, cmd), []string{"serve"}) {
		t.Errorf("Dockerfile: the final stage's CMD is not [\"serve\"]")
	}

	// Non-root, by numeric UID so that Kubernetes runAsNonRoot can verify it.
	if user, ok := final.last("USER"); ok {
		uid, _, _ := strings.Cut(user.Args, ":")
		n, err := strconv.Atoi(uid)
		switch {
		case err != nil:
			t.Errorf("Dockerfile:%d: USER %s: use a numeric UID (e.g. 65532); Kubernetes cannot check that a named user is non-root", user.Line, user.Args)
		case n == 0:
			t.Errorf("Dockerfile:%d: USER %s is root", user.Line, user.Args)
		}
	} else if !strings.HasSuffix(final.Base, ":nonroot") {
		t.Errorf("Dockerfile: the final stage (%s) sets no USER and is not a :nonroot image: it runs as root", final.Base)
	}

	// Its environment is valid configuration, and the policies are where it says.
	env := dockerEnv(final)
	for k := range env {
		if !strings.HasPrefix(k, "REDRIVE_") {
			delete(env, k)
		}
	}
	if err := checkEnvNames(env); err != nil {
		t.Errorf("Dockerfile ENV:\n%v", err)
	}
	cfg := loadConfig(t, env)
	var policiesDest string
	for _, cp := range final.all("COPY") {
		f := strings.Fields(cp.Args)
		if len(f) >= 2 && strings.TrimSuffix(f[len(f)-2], "/") == "policies" {
			policiesDest = strings.TrimSuffix(f[len(f)-1], "/")
		}
	}
	if policiesDest == "" {
		t.Error("Dockerfile: the final stage does not COPY policies/")
	} else if path.Clean(cfg.PoliciesDir) != policiesDest {
		t.Errorf("Dockerfile: policies are copied to %s but REDRIVE_POLICIES_DIR is %q", policiesDest, cfg.PoliciesDir)
	}

	port := strconv.Itoa(addrPort(t, cfg.HTTPAddr))
	var exposed []string
	for _, e := range final.all("EXPOSE") {
		for _, p := range strings.Fields(e.Args) {
			exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
		}
	}
	if !slices.Contains(exposed, port) {
		t.Errorf("Dockerfile: EXPOSE %v, but redrive listens on %s (REDRIVE_HTTP_ADDR %q)", exposed, port, cfg.HTTPAddr)
	}
}

// .dockerignore keeps nothing out of the context that the build needs: Go
// sources, go.mod/go.sum, go:embed files and the policies.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	ignored := dockerignore(t, root)
	embed := regexp.MustCompile(`(?m)^//go:embed\s+(.+)$`)
	check := func(rel string) {
		if ignored(rel) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", rel)
		}
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(must(filepath.Rel(root, p)))
		if d.IsDir() {
			if rel == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case rel == "go.mod" || rel == "go.sum" || strings.HasPrefix(rel, "policies/"):
			check(rel)
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go"):
			check(rel)
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range embed.FindAllSubmatch(src, -1) {
				for _, pattern := range strings.Fields(string(m[1])) {
					pattern = strings.TrimPrefix(strings.Trim(pattern, "`\""), "all:")
					files, _ := filepath.Glob(filepath.Join(filepath.Dir(p), pattern))
					for _, f := range files {
						check(filepath.ToSlash(must(filepath.Rel(root, f))))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dockerignore returns whether .dockerignore keeps a path (slash-separated,
// relative to the context) out of the build context: the last matching
// pattern wins, "!" re-includes, and a pattern matching a directory covers
// everything under it.
func dockerignore(t *testing.T, root string) func(string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if os.IsNotExist(err) {
		return func(string) bool { return false }
	}
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		re     *regexp.Regexp
		negate bool
	}
	var rules []rule
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := rule{}
		if l, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, l
		}
		line = strings.Trim(path.Clean("/"+line), "/")
		var re strings.Builder
		for i := 0; i < len(line); i++ {
			switch {
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case line[i] == '*':
				re.WriteString("[^/]*")
			case line[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(line[i : i+1]))
			}
		}
		r.re = regexp.MustCompile("^" + re.String() + "(/.*)?$")
		rules = append(rules, r)
	}
	return func(p string) bool {
		out := false
		for _, r := range rules {
			if r.re.MatchString(p) {
				out = !r.negate
			}
		}
		return out
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
