package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/redrive/redrive/internal/config"
)

func env(m map[string]string) config.Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	c, err := config.Load(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.Group != "redrive" || len(c.DLQTopics) != 1 || c.DLQTopics[0] != "dead_letter_queue" ||
		c.KafkaBrokers[0] != "127.0.0.1:9092" || c.MigrateOnStart || c.ShutdownGrace.String() != "15s" {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse([]string{"--group=from-flag"}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(env(map[string]string{
		"REDRIVE_GROUP": "from-env", "REDRIVE_DLQ_TOPICS": " a, b ,,", "REDRIVE_MIGRATE_ON_START": "true",
	}), fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Group != "from-flag" || strings.Join(c.DLQTopics, "|") != "a|b" || !c.MigrateOnStart {
		t.Fatalf("config = %+v", c)
	}
}

func TestBadValuesNameTheSetting(t *testing.T) {
	_, err := config.Load(env(map[string]string{
		"REDRIVE_MIGRATE_ON_START":     "yes please",
		"REDRIVE_SHUTDOWN_GRACE":       "soon",
		"REDRIVE_LOG_LEVEL":            "loud",
		"REDRIVE_DLQ_TOPICS":           " , ",
		"REDRIVE_KAFKA_SASL_MECHANISM": "GSSAPI",
	}), nil)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, name := range []string{"REDRIVE_MIGRATE_ON_START", "REDRIVE_SHUTDOWN_GRACE", "REDRIVE_LOG_LEVEL", "REDRIVE_KAFKA_SASL_MECHANISM"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	_, err = config.Load(env(map[string]string{"REDRIVE_DLQ_TOPICS": " , "}), nil)
	if err == nil || !strings.Contains(err.Error(), "REDRIVE_DLQ_TOPICS") {
		t.Errorf("empty topic list: %v", err)
	}
	_, err = config.Load(env(map[string]string{"REDRIVE_KAFKA_TLS_CERT_FILE": "c.pem"}), nil)
	if err == nil || !strings.Contains(err.Error(), "REDRIVE_KAFKA_TLS_KEY_FILE") {
		t.Errorf("cert without key: %v", err)
	}
}

// The README's configuration table is the reference: it must list every
// setting with its flag and default.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Settings {
		row := "| `" + s.Env + "` | `--" + s.Flag + "` | |"
		if s.Default != "" {
			row = "| `" + s.Env + "` | `--" + s.Flag + "` | `" + s.Default + "` |"
		}
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks the row starting %q", row)
		}
	}
}
