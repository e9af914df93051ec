package deploytest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/config"
)

// repoRoot is the repository root: the nearest parent directory with go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// readRepoFile reads a file given by its path from the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setting returns the configuration setting read from the environment variable env.
func setting(env string) (config.Setting, bool) {
	i := slices.IndexFunc(config.Settings, func(s config.Setting) bool { return s.Env == env })
	if i < 0 {
		return config.Setting{}, false
	}
	return config.Settings[i], true
}

// secretSettings must come from a secret store in production manifests,
// never from a ConfigMap or a literal value.
var secretSettings = []string{"REDRIVE_DATABASE_URL", "REDRIVE_KAFKA_SASL_PASSWORD",
	"REDRIVE_SCHEMA_REGISTRY_PASSWORD", "REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN"}

// runtimeEnv are the environment variables other than REDRIVE_* that a
// deploy file may set on the redrive container: the Go runtime's own. Anything
// else is most likely a misspelt setting that Redrive would silently ignore.
var runtimeEnv = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC", "GODEBUG", "TZ"}

// checkEnvNames reports every variable in env that Redrive does not read.
func checkEnvNames(env map[string]string) error {
	var errs []error
	for _, name := range sortedKeys(env) {
		if strings.HasPrefix(name, config.EnvPrefix) {
			if _, ok := setting(name); !ok {
				errs = append(errs, fmt.Errorf("%s is not a Redrive setting (see internal/config.Settings)", name))
			}
			continue
		}
		if !slices.Contains(runtimeEnv, name) {
			errs = append(errs, fmt.Errorf("%s is neither a REDRIVE_* setting nor a Go runtime variable (%s)", name, strings.Join(runtimeEnv, ", ")))
		}
	}
	return errors.Join(errs...)
}

// loadConfig runs env through config.Load as the binary would see it.
func loadConfig(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}, nil)
	if err != nil {
		t.Fatalf("config.Load rejects the environment:\n%v", err)
	}
	return cfg
}

// addrPort is the port of a listen address such as ":8080" or "0.0.0.0:8080".
func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("address %q: port is not a number", addr)
	}
	return n
}

// defaultHTTPPort is the port of REDRIVE_HTTP_ADDR's default.
func defaultHTTPPort(t *testing.T) int {
	t.Helper()
	s, ok := setting("REDRIVE_HTTP_ADDR")
	if !ok {
		t.Fatal("REDRIVE_HTTP_ADDR is not in config.Settings")
	}
	return addrPort(t, s.Default)
}

// goDirective is the major.minor of go.mod's go line, e.g. "1.26".
func goDirective(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go\s+(\d+\.\d+)(\.\d+)?\s*$`).FindSubmatch(readRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
