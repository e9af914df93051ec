package config_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

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
	if c.GroupInstanceID != "" || c.KafkaSessionTimeout != 45*time.Second || c.KafkaRebalanceTimeout != 60*time.Second {
		t.Errorf("group defaults = %q %v %v, want \"\" 45s 60s", c.GroupInstanceID, c.KafkaSessionTimeout, c.KafkaRebalanceTimeout)
	}
	if !c.CreateTopics || c.TopicPartitions != -1 || c.TopicReplicationFactor != -1 {
		t.Errorf("topic defaults = %v %d %d, want true -1 -1", c.CreateTopics, c.TopicPartitions, c.TopicReplicationFactor)
	}
}

func TestGroupAndTopicSettingsFromEnvironment(t *testing.T) {
	c, err := config.Load(env(map[string]string{
		"REDRIVE_GROUP_INSTANCE_ID":        " redrive-1 ",
		"REDRIVE_KAFKA_SESSION_TIMEOUT":    "2m",
		"REDRIVE_KAFKA_REBALANCE_TIMEOUT":  "30s", // shorter than the session timeout is allowed
		"REDRIVE_CREATE_TOPICS":            "false",
		"REDRIVE_TOPIC_PARTITIONS":         "12",
		"REDRIVE_TOPIC_REPLICATION_FACTOR": "3",
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.GroupInstanceID != "redrive-1" || c.KafkaSessionTimeout != 2*time.Minute || c.KafkaRebalanceTimeout != 30*time.Second ||
		c.CreateTopics || c.TopicPartitions != 12 || c.TopicReplicationFactor != 3 {
		t.Fatalf("config = %+v", c)
	}
}

func TestBadGroupAndTopicSettingsNameTheSetting(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"REDRIVE_KAFKA_SESSION_TIMEOUT", "0s", "must be positive"},
		{"REDRIVE_KAFKA_SESSION_TIMEOUT", "-5s", "not a duration"},
		{"REDRIVE_KAFKA_SESSION_TIMEOUT", "forever", "not a duration"},
		{"REDRIVE_KAFKA_SESSION_TIMEOUT", "10ms", "below the minimum of 100ms"},
		{"REDRIVE_KAFKA_REBALANCE_TIMEOUT", "0", "must be positive"},
		{"REDRIVE_KAFKA_REBALANCE_TIMEOUT", "1000h", "above the maximum"},
		{"REDRIVE_CREATE_TOPICS", "maybe", "not a boolean"},
		{"REDRIVE_TOPIC_PARTITIONS", "0", "not -1 (the broker's default) or a positive whole number"},
		{"REDRIVE_TOPIC_PARTITIONS", "-2", "not -1"},
		{"REDRIVE_TOPIC_PARTITIONS", "three", "not -1"},
		{"REDRIVE_TOPIC_PARTITIONS", "2147483648", "not -1"},
		{"REDRIVE_TOPIC_REPLICATION_FACTOR", "0", "not -1"},
		{"REDRIVE_TOPIC_REPLICATION_FACTOR", "32768", "not -1"},
	} {
		_, err := config.Load(env(map[string]string{tc.env: tc.value}), nil)
		if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: error %v, want one naming %s and saying %q", tc.env, tc.value, err, tc.env, tc.want)
		}
	}
}

// GroupOpts carry the timeouts and the instance id into the client, and a
// short session timeout lowers the heartbeat interval franz-go requires
// below it.
func TestGroupOpts(t *testing.T) {
	for _, tc := range []struct {
		env       map[string]string
		instance  string
		session   time.Duration
		rebalance time.Duration
		heartbeat time.Duration
	}{
		{nil, "", 45 * time.Second, 60 * time.Second, 3 * time.Second},
		{map[string]string{"REDRIVE_GROUP_INSTANCE_ID": "redrive-0", "REDRIVE_KAFKA_SESSION_TIMEOUT": "3s", "REDRIVE_KAFKA_REBALANCE_TIMEOUT": "2s"},
			"redrive-0", 3 * time.Second, 2 * time.Second, time.Second},
	} {
		c, err := config.Load(env(tc.env), nil)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}, c.GroupOpts()...)...)
		if err != nil {
			t.Fatalf("%v: new client: %v", tc.env, err)
		}
		instance, hasInstance := cl.OptValues(kgo.InstanceID)[0], cl.OptValues(kgo.InstanceID)[1].(bool)
		if instance != tc.instance || hasInstance != (tc.instance != "") {
			t.Errorf("%v: instance id %q (set %v), want %q", tc.env, instance, hasInstance, tc.instance)
		}
		if got := cl.OptValue(kgo.SessionTimeout); got != tc.session {
			t.Errorf("%v: session timeout %v, want %v", tc.env, got, tc.session)
		}
		if got := cl.OptValue(kgo.RebalanceTimeout); got != tc.rebalance {
			t.Errorf("%v: rebalance timeout %v, want %v", tc.env, got, tc.rebalance)
		}
		if got := cl.OptValue(kgo.HeartbeatInterval); got != tc.heartbeat {
			t.Errorf("%v: heartbeat interval %v, want %v", tc.env, got, tc.heartbeat)
		}
		cl.Close()
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
	for _, s := range slices.Concat(config.Settings, config.DevSettings) {
		row := "| `" + s.Env + "` | `--" + s.Flag + "` | |"
		if s.Default != "" {
			row = "| `" + s.Env + "` | `--" + s.Flag + "` | `" + s.Default + "` |"
		}
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks the row starting %q", row)
		}
	}
}

// On/off settings are boolean flags: given alone they mean true, and --help
// shows them without a value type.
func TestBoolSettingsAreBoolFlags(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse([]string{"--kafka-tls", "--migrate", "--create-topics=false", "--kafka-brokers", "b:9092"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(string) (string, bool) { return "", false }, fs)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Kafka.TLS || !cfg.MigrateOnStart || cfg.CreateTopics {
		t.Errorf("tls %v migrate %v create-topics %v; want true, true, false", cfg.Kafka.TLS, cfg.MigrateOnStart, cfg.CreateTopics)
	}
	for _, s := range config.Settings {
		f := fs.Lookup(s.Flag)
		if (s.Default == "true" || s.Default == "false") != (f.Value.Type() == "bool") {
			t.Errorf("--%s is a %s flag with default %q", s.Flag, f.Value.Type(), s.Default)
		}
	}
	if !strings.Contains(fs.FlagUsages(), "--kafka-tls ") || strings.Contains(fs.FlagUsages(), "--kafka-tls string") {
		t.Errorf("usage of --kafka-tls: %s", fs.FlagUsages())
	}
}

// The retry policy limits: defaults of 100 attempts and 1s, set from the
// environment, and nonsense refused naming the variable.
func TestRetryLimits(t *testing.T) {
	c, err := config.Load(env(nil), nil)
	if err != nil || c.RetryMaxAttempts != 100 || c.RetryMinInterval != time.Second {
		t.Fatalf("defaults = %d %v, %v; want 100 1s", c.RetryMaxAttempts, c.RetryMinInterval, err)
	}
	c, err = config.Load(env(map[string]string{"REDRIVE_RETRY_MAX_ATTEMPTS": "25", "REDRIVE_RETRY_MIN_INTERVAL": "100ms"}), nil)
	if err != nil || c.RetryMaxAttempts != 25 || c.RetryMinInterval != 100*time.Millisecond {
		t.Fatalf("from env = %d %v, %v", c.RetryMaxAttempts, c.RetryMinInterval, err)
	}
	for k, v := range map[string]string{"REDRIVE_RETRY_MAX_ATTEMPTS": "0", "REDRIVE_RETRY_MIN_INTERVAL": "0s"} {
		if _, err := config.Load(env(map[string]string{k: v}), nil); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
	if _, err := config.Load(env(map[string]string{"REDRIVE_RETRY_MAX_ATTEMPTS": "lots"}), nil); err == nil ||
		!strings.Contains(err.Error(), "REDRIVE_RETRY_MAX_ATTEMPTS") {
		t.Errorf("lots: %v", err)
	}
}

// The event-stream caps, their write timeout and the metrics' queue limit:
// defaults, overrides, and a bad value names the setting.
func TestEventStreamAndMetricsLimits(t *testing.T) {
	c, err := config.Load(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.EventsMaxStreams != 500 || c.EventsMaxStreamsPerKey != 50 || c.EventsWriteTimeout != 10*time.Second || c.MetricsMaxQueues != 300 {
		t.Errorf("defaults %d %d %v %d, want 500 50 10s 300", c.EventsMaxStreams, c.EventsMaxStreamsPerKey, c.EventsWriteTimeout, c.MetricsMaxQueues)
	}
	c, err = config.Load(env(map[string]string{"REDRIVE_EVENTS_MAX_STREAMS": "20", "REDRIVE_EVENTS_MAX_STREAMS_PER_KEY": " 2 ",
		"REDRIVE_EVENTS_WRITE_TIMEOUT": "1s", "REDRIVE_METRICS_MAX_QUEUES": "1000"}), nil)
	if err != nil || c.EventsMaxStreams != 20 || c.EventsMaxStreamsPerKey != 2 || c.EventsWriteTimeout != time.Second || c.MetricsMaxQueues != 1000 {
		t.Errorf("overrides: %d %d %v %d, %v", c.EventsMaxStreams, c.EventsMaxStreamsPerKey, c.EventsWriteTimeout, c.MetricsMaxQueues, err)
	}
	for _, tc := range []struct{ env, value, want string }{
		{"REDRIVE_EVENTS_MAX_STREAMS", "0", "not a positive whole number"},
		{"REDRIVE_EVENTS_MAX_STREAMS_PER_KEY", "-1", "not a positive whole number"},
		{"REDRIVE_EVENTS_MAX_STREAMS_PER_KEY", "many", "not a positive whole number"},
		{"REDRIVE_EVENTS_WRITE_TIMEOUT", "0s", "must be positive"},
		{"REDRIVE_METRICS_MAX_QUEUES", "0", "not a positive whole number"},
	} {
		_, err := config.Load(env(map[string]string{tc.env: tc.value}), nil)
		if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: error %v, want one naming %s and saying %q", tc.env, tc.value, err, tc.env, tc.want)
		}
	}
}

// The export caps: defaults, overrides, and a bad value names the setting.
func TestExportLimits(t *testing.T) {
	c, err := config.Load(env(nil), nil)
	if err != nil || c.ExportsMax != 4 || c.ExportsMaxPerKey != 2 {
		t.Errorf("defaults %d %d (%v), want 4 2", c.ExportsMax, c.ExportsMaxPerKey, err)
	}
	c, err = config.Load(env(map[string]string{"REDRIVE_EXPORTS_MAX": "10", "REDRIVE_EXPORTS_MAX_PER_KEY": " 3 "}), nil)
	if err != nil || c.ExportsMax != 10 || c.ExportsMaxPerKey != 3 {
		t.Errorf("overrides: %d %d, %v", c.ExportsMax, c.ExportsMaxPerKey, err)
	}
	for _, tc := range []struct{ env, value string }{{"REDRIVE_EXPORTS_MAX", "0"}, {"REDRIVE_EXPORTS_MAX_PER_KEY", "-1"}, {"REDRIVE_EXPORTS_MAX_PER_KEY", "two"}} {
		_, err := config.Load(env(map[string]string{tc.env: tc.value}), nil)
		if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), "not a positive whole number") {
			t.Errorf("%s=%q: error %v, want one naming %s", tc.env, tc.value, err, tc.env)
		}
	}
}

func TestKafkaIdentitySettingsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"REDRIVE_KAFKA_SASL_MECHANISM": "OAUTHBEARER"},
			[]string{"REDRIVE_KAFKA_OAUTH_TOKEN_URL", "REDRIVE_KAFKA_OAUTH_CLIENT_ID"}},
		{map[string]string{"REDRIVE_KAFKA_SASL_MECHANISM": "oauthbearer", "REDRIVE_KAFKA_OAUTH_TOKEN_URL": "http://idp.example/token",
			"REDRIVE_KAFKA_OAUTH_CLIENT_ID": "c", "REDRIVE_KAFKA_OAUTH_CLIENT_SECRET": "s"},
			[]string{"REDRIVE_KAFKA_OAUTH_TOKEN_URL", "https"}},
		{map[string]string{"REDRIVE_KAFKA_SASL_MECHANISM": "OAUTHBEARER", "REDRIVE_KAFKA_OAUTH_TOKEN_URL": "https://idp.example/token",
			"REDRIVE_KAFKA_OAUTH_CLIENT_ID": "c", "REDRIVE_KAFKA_OAUTH_CLIENT_SECRET": "s", "REDRIVE_KAFKA_OAUTH_EXTENSIONS": "auth=x"},
			[]string{"REDRIVE_KAFKA_OAUTH_EXTENSIONS", `"auth=x"`}},
		{map[string]string{"REDRIVE_KAFKA_SASL_MECHANISM": "AWS_MSK_IAM"}, []string{"REDRIVE_KAFKA_TLS", "AWS_MSK_IAM"}},
		{map[string]string{"REDRIVE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}, []string{"REDRIVE_KAFKA_SASL_USERNAME"}},
	} {
		_, err := config.Load(env(tc.env), nil)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v; want an error saying %s", tc.env, err, w)
			}
		}
	}
	// Complete settings load, and http is allowed on a loopback host only.
	for _, e := range []map[string]string{
		{"REDRIVE_KAFKA_SASL_MECHANISM": "OAUTHBEARER", "REDRIVE_KAFKA_OAUTH_TOKEN_URL": "http://127.0.0.1:8081/token",
			"REDRIVE_KAFKA_OAUTH_CLIENT_ID": "c", "REDRIVE_KAFKA_OAUTH_CLIENT_SECRET": "s", "REDRIVE_KAFKA_OAUTH_EXTENSIONS": "logicalCluster=lkc-1"},
		{"REDRIVE_KAFKA_SASL_MECHANISM": "AWS_MSK_IAM", "REDRIVE_KAFKA_TLS": "true"},
	} {
		if _, err := config.Load(env(e), nil); err != nil {
			t.Errorf("%v: %v", e, err)
		}
	}
}

// REDRIVE_KAFKA_PORT moves redrive dev's in-process Kafka: 9092 unless set,
// the flag over the variable, nonsense refused naming what was given. It is
// dev's alone: serve's Load neither reads nor checks it.
func TestDevKafkaPort(t *testing.T) {
	c, err := config.LoadDev(env(nil), nil)
	if err != nil || c.DevKafkaPort != 9092 {
		t.Fatalf("default: %d, %v; want 9092", c.DevKafkaPort, err)
	}
	c, err = config.LoadDev(env(map[string]string{"REDRIVE_KAFKA_PORT": " 19765 "}), nil)
	if err != nil || c.DevKafkaPort != 19765 {
		t.Fatalf("from env: %d, %v; want 19765", c.DevKafkaPort, err)
	}
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	config.RegisterDevFlags(fs)
	if err := fs.Parse([]string{"--kafka-port", "0"}); err != nil {
		t.Fatal(err)
	}
	c, err = config.LoadDev(env(map[string]string{"REDRIVE_KAFKA_PORT": "19765"}), fs)
	if err != nil || c.DevKafkaPort != 0 {
		t.Fatalf("flag over env: %d, %v; want 0", c.DevKafkaPort, err)
	}
	for _, v := range []string{"kafka", "-1", "65536", "9092.5", ""} {
		_, err := config.LoadDev(env(map[string]string{"REDRIVE_KAFKA_PORT": v}), nil)
		want := `REDRIVE_KAFKA_PORT: "` + v + `" is not a port (want a whole number from 0 to 65535`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("REDRIVE_KAFKA_PORT=%q: %v; want an error saying %s", v, err, want)
		}
	}
	if c, err := config.Load(env(map[string]string{"REDRIVE_KAFKA_PORT": "kafka"}), nil); err != nil || c.DevKafkaPort != 0 {
		t.Errorf("serve's Load read REDRIVE_KAFKA_PORT: %d, %v", c.DevKafkaPort, err)
	}
	serve := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.RegisterFlags(serve)
	if serve.Lookup("kafka-port") != nil {
		t.Error("serve's flags include --kafka-port")
	}
}
