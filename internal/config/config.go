// Package config is Redrive's configuration: one table of settings, each read
// from a REDRIVE_* environment variable and overridable by a command-line flag.
// The same table documents the settings (README) and checks deploy files.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Config is the processor's configuration.
type Config struct {
	KafkaBrokers []string
	DLQTopics    []string
	Group        string
	DatabaseURL  string
	HTTPAddr     string
	// HTTPReadTimeout bounds reading a request, body included;
	// HTTPWriteTimeout bounds writing a response. The event stream is exempt
	// from both (it keeps itself alive with heartbeats); EventsWriteTimeout
	// bounds each of its writes instead.
	HTTPReadTimeout  time.Duration
	HTTPWriteTimeout time.Duration
	PoliciesDir      string
	ArchiveTopic     string
	EventsTopic      string
	PruneInterval    time.Duration
	ReplayInterval   time.Duration
	APIKeysFile      string
	AuthDisabled     bool
	MigrateOnStart   bool
	LogLevel         string
	LogFormat        string
	ShutdownGrace    time.Duration
	Kafka            KafkaSecurity
	// SchemaRegistry is how to reach a Confluent Schema Registry; decoding
	// is off when it has no URL (the default).
	SchemaRegistry SchemaRegistry

	// GroupInstanceID makes ingest a static group member (group.instance.id):
	// a restart within the session timeout rejoins without a rebalance.
	// Default: empty (dynamic membership).
	GroupInstanceID string
	// KafkaSessionTimeout is how long the group waits for a silent ingest
	// consumer before moving its partitions. Default: 45s.
	KafkaSessionTimeout time.Duration
	// KafkaRebalanceTimeout is how long members may take to rejoin once a
	// rebalance has begun. Default: 60s.
	KafkaRebalanceTimeout time.Duration

	// CreateTopics creates missing archive and events topics at start; when
	// false they are only checked and each missing one is logged. Default: true.
	CreateTopics bool
	// TopicPartitions and TopicReplicationFactor are given to the topics
	// Redrive creates; -1 (the default) leaves them to the broker's defaults.
	TopicPartitions        int32
	TopicReplicationFactor int16

	// RetryMaxAttempts is the largest max_attempts a retry policy may set:
	// policy files and API topic configs past it are refused, a record's
	// redrive.retry header is clamped to it. Default: 100.
	RetryMaxAttempts int
	// RetryMinInterval is the shortest initial_interval and max_interval a
	// retry policy may set, enforced the same way. Default: 1s.
	RetryMinInterval time.Duration
	// Environment names where this processor runs (production, staging):
	// an ingest filter with when_env applies only where one of its globs
	// matches it. Default: "" (no filter with when_env applies).
	Environment string
	// EventsMaxStreams bounds the open event streams (GET /ojs/v1/events) in
	// total; EventsMaxStreamsPerKey per API key (per client address with
	// auth disabled). Past either a stream is refused with 503 and
	// Retry-After. Defaults: 500 and 50.
	EventsMaxStreams       int
	EventsMaxStreamsPerKey int
	// EventsWriteTimeout bounds each write to an event stream; a client that
	// stops reading is dropped. Default: 10s.
	EventsWriteTimeout time.Duration
	// ExportsMax bounds the exports (GET /ojs/v1/dead-letter/export) running
	// at once in total; ExportsMaxPerKey per API key (per client address
	// with auth disabled). Past either an export is refused with 503 and
	// Retry-After. Each holds a few megabytes of records and reads Postgres
	// while its client reads. Defaults: 4 and 2.
	ExportsMax       int
	ExportsMaxPerKey int
	// MetricsMaxQueues bounds the queue label of the metrics: queues declared
	// in policy files or through the API, then the first queues seen, up to
	// this many; the rest are reported as queue="other". Default: 300.
	MetricsMaxQueues int
	// OIDC is single sign-on (docs/security.md); off when it has no issuer
	// (the default).
	OIDC OIDC
	// RolesFile maps identity-provider groups, subjects and emails to roles
	// granting actions on queue globs. Required with OIDC. Default: none.
	RolesFile string
	// TraceURL is the URL of a trace in the operators' tracing UI, with
	// {trace_id} where the id goes; the console links records' trace ids to
	// it. Default: empty, unlinked.
	TraceURL string

	// DevKafkaPort is the port of redrive dev's in-process Kafka on
	// 127.0.0.1 (REDRIVE_KAFKA_PORT, a DevSettings entry: only LoadDev reads
	// it). Default: 9092; 0 picks any free port.
	DevKafkaPort int
}

// KafkaSecurity holds the Kafka TLS and SASL settings.
type KafkaSecurity struct {
	TLS           bool
	TLSCAFile     string
	TLSCertFile   string
	TLSKeyFile    string
	TLSServerName string
	SASLMechanism string // "", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM
	SASLUser      string
	SASLPassword  string
	// OAUTHBEARER: the client-credentials grant at OAuthTokenURL
	// (kafka_identity.go), with optional scopes and RFC 7628 extensions
	// (key=value, e.g. Confluent Cloud's logicalCluster and identityPoolId).
	OAuthTokenURL     string
	OAuthClientID     string
	OAuthClientSecret string
	OAuthScopes       []string
	OAuthExtensions   []string
}

// OIDC holds the single sign-on settings (docs/security.md).
type OIDC struct {
	// Issuer is the provider's issuer URL; empty (the default) turns SSO off.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the console login's callback (…/auth/callback);
	// empty: bearer tokens only, no console login.
	RedirectURL string
	// Scopes asked for at login. Default: openid, email, profile.
	Scopes []string
	// GroupsClaim names the token claim with the person's groups. Default: groups.
	GroupsClaim string
	// SessionTTL is how long a console session lasts. Default: 8h.
	SessionTTL time.Duration
	// SessionKey is the base64 of the 32-byte key sealing session cookies;
	// empty: a key generated at start.
	SessionKey string
}

// Enabled reports whether single sign-on is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// SessionKeyBytes decodes SessionKey (nil when empty; validate checked it).
func (o OIDC) SessionKeyBytes() []byte {
	if o.SessionKey == "" {
		return nil
	}
	b, _ := base64.StdEncoding.DecodeString(o.SessionKey)
	return b
}

// SchemaRegistry holds the schema registry settings (docs/schema-registry.md).
type SchemaRegistry struct {
	// URLs are tried in turn; none (the default) turns decoding off.
	URLs        []string
	Username    string
	Password    string
	BearerToken string
	TLSCAFile   string
	TLSCertFile string
	TLSKeyFile  string
	// Timeout bounds each registry request. Default: 10s.
	Timeout time.Duration
}

// Enabled reports whether a registry is configured.
func (s SchemaRegistry) Enabled() bool { return len(s.URLs) > 0 }

// Setting is one configuration entry: its environment variable, flag, default
// and how it is applied.
type Setting struct {
	Env     string
	Flag    string
	Default string
	Help    string
	set     func(c *Config, v string) error
}

// The group timeouts franz-go accepts: at least 100ms, at most what Kafka's
// int32 milliseconds hold. Brokers narrow the session timeout further
// (group.min/max.session.timeout.ms, 6s to 30m by default).
const (
	minGroupTimeout = 100 * time.Millisecond
	maxGroupTimeout = time.Duration(math.MaxInt32) * time.Millisecond
)

// maxRetryMinInterval is the longest floor REDRIVE_RETRY_MIN_INTERVAL takes:
// the longest interval a retry policy may have (P366D).
const maxRetryMinInterval = 366 * 24 * time.Hour

// Off is the value that turns off an optional topic (archive, events).
const Off = "off"

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "REDRIVE_"

// Settings is the full table, in documentation order.
var Settings = []Setting{
	{"REDRIVE_KAFKA_BROKERS", "kafka-brokers", "127.0.0.1:9092", "Kafka seed brokers, comma-separated.", setList(func(c *Config) *[]string { return &c.KafkaBrokers })},
	{"REDRIVE_DLQ_TOPICS", "dlq-topics", "dead_letter_queue", "DLQ topics to consume, comma-separated.", setList(func(c *Config) *[]string { return &c.DLQTopics })},
	{"REDRIVE_GROUP", "group", "redrive", "Consumer group of the processor.", setString(func(c *Config) *string { return &c.Group })},
	{"REDRIVE_GROUP_INSTANCE_ID", "group-instance-id", "", "Static group membership for ingest (Kafka group.instance.id), unique per replica: a replica restarted within the session timeout gets its partitions back without a rebalance. In Kubernetes: the pod name.", setString(func(c *Config) *string { return &c.GroupInstanceID })},
	{"REDRIVE_KAFKA_SESSION_TIMEOUT", "kafka-session-timeout", "45s", "How long the group waits for a silent ingest consumer before moving its partitions to the others (with a group instance id: how long a restart may take).", setDuration(func(c *Config) *time.Duration { return &c.KafkaSessionTimeout })},
	{"REDRIVE_KAFKA_REBALANCE_TIMEOUT", "kafka-rebalance-timeout", "60s", "How long group members may take to rejoin once a rebalance has begun.", setDuration(func(c *Config) *time.Duration { return &c.KafkaRebalanceTimeout })},
	{"REDRIVE_DATABASE_URL", "database-url", "", "Postgres connection URL (required by serve; dev starts a throwaway Postgres when empty).", setString(func(c *Config) *string { return &c.DatabaseURL })},
	{"REDRIVE_HTTP_ADDR", "http-addr", ":8080", "Address of the HTTP API, metrics and health endpoints.", setString(func(c *Config) *string { return &c.HTTPAddr })},
	{"REDRIVE_HTTP_READ_TIMEOUT", "http-read-timeout", "30s", "Longest time to read an API request, body included; a slower client is cut off.", setDuration(func(c *Config) *time.Duration { return &c.HTTPReadTimeout })},
	{"REDRIVE_HTTP_WRITE_TIMEOUT", "http-write-timeout", "60s", "Longest time to write an API response (the event stream is exempt: each of its writes has REDRIVE_EVENTS_WRITE_TIMEOUT).", setDuration(func(c *Config) *time.Duration { return &c.HTTPWriteTimeout })},
	{"REDRIVE_POLICIES_DIR", "policies", "policies", "Directory of policy files (*.yaml).", setString(func(c *Config) *string { return &c.PoliciesDir })},
	{"REDRIVE_ARCHIVE_TOPIC", "archive-topic", "", "Topic exhausted records are copied to: empty for \"<dlq topic>.archive\", \"off\" to disable.", setString(func(c *Config) *string { return &c.ArchiveTopic })},
	{"REDRIVE_EVENTS_TOPIC", "events-topic", "", "Topic lifecycle events are produced to: empty for \"<first dlq topic>.events\", \"off\" to disable (the SSE stream stays on).", setString(func(c *Config) *string { return &c.EventsTopic })},
	{"REDRIVE_EVENTS_MAX_STREAMS", "events-max-streams", "500", "Most event streams (GET /ojs/v1/events) open at once; past it a stream is refused with 503 and Retry-After.", setPositive(func(c *Config) *int { return &c.EventsMaxStreams })},
	{"REDRIVE_EVENTS_MAX_STREAMS_PER_KEY", "events-max-streams-per-key", "50", "Most event streams one API key (with auth disabled: one client address) may have open at once; past it, 503 and Retry-After.", setPositive(func(c *Config) *int { return &c.EventsMaxStreamsPerKey })},
	{"REDRIVE_EVENTS_WRITE_TIMEOUT", "events-write-timeout", "10s", "Longest time one write to an event stream may take; a client that stops reading is dropped.", setDuration(func(c *Config) *time.Duration { return &c.EventsWriteTimeout })},
	{"REDRIVE_EXPORTS_MAX", "exports-max", "4", "Most exports (GET /ojs/v1/dead-letter/export) running at once; past it an export is refused with 503 and Retry-After.", setPositive(func(c *Config) *int { return &c.ExportsMax })},
	{"REDRIVE_EXPORTS_MAX_PER_KEY", "exports-max-per-key", "2", "Most exports one API key (with auth disabled: one client address) may have running at once; past it, 503 and Retry-After.", setPositive(func(c *Config) *int { return &c.ExportsMaxPerKey })},
	{"REDRIVE_METRICS_MAX_QUEUES", "metrics-max-queues", "300", "Most queues with their own metric label: queues declared in policy files or through the API first, then the first seen; the rest are reported as queue=\"other\".", setPositive(func(c *Config) *int { return &c.MetricsMaxQueues })},
	{"REDRIVE_CREATE_TOPICS", "create-topics", "true", "Create missing archive and events topics at start (false: only log an error naming each missing one).", setBool(func(c *Config) *bool { return &c.CreateTopics })},
	{"REDRIVE_TOPIC_PARTITIONS", "topic-partitions", "-1", "Partition count of the topics Redrive creates (-1: the broker's default).", setCount(func(c *Config) *int32 { return &c.TopicPartitions })},
	{"REDRIVE_TOPIC_REPLICATION_FACTOR", "topic-replication-factor", "-1", "Replication factor of the topics Redrive creates (-1: the broker's default).", setCount(func(c *Config) *int16 { return &c.TopicReplicationFactor })},
	{"REDRIVE_RETRY_MAX_ATTEMPTS", "retry-max-attempts", "100", "Largest max_attempts a retry policy may set: policy files and API topic configs past it are refused, a record's redrive.retry header is clamped to it.", setPositive(func(c *Config) *int { return &c.RetryMaxAttempts })},
	{"REDRIVE_ENVIRONMENT", "environment", "", "Where this processor runs (production, staging): an ingest filter with when_env applies only where one of its globs matches it; empty, none does.", setString(func(c *Config) *string { return &c.Environment })},
	{"REDRIVE_RETRY_MIN_INTERVAL", "retry-min-interval", "1s", "Shortest initial_interval and max_interval a retry policy may set, enforced the same way (a forged header cannot loop a record).", setDuration(func(c *Config) *time.Duration { return &c.RetryMinInterval })},
	{"REDRIVE_PRUNE_INTERVAL", "prune-interval", "5m", "How often the pruner applies retention (one replica at a time).", setDuration(func(c *Config) *time.Duration { return &c.PruneInterval })},
	{"REDRIVE_REPLAY_INTERVAL", "replay-interval", "30s", "How often replay rules are evaluated (one replica at a time).", setDuration(func(c *Config) *time.Duration { return &c.ReplayInterval })},
	{"REDRIVE_API_KEYS_FILE", "api-keys-file", "", "YAML file of API keys (name, scope, sha256).", setString(func(c *Config) *string { return &c.APIKeysFile })},
	{"REDRIVE_AUTH_DISABLED", "auth-disabled", "false", "Serve the API without authentication (dev only; serve refuses to start without a keys file or REDRIVE_OIDC_ISSUER otherwise).", setBool(func(c *Config) *bool { return &c.AuthDisabled })},
	{"REDRIVE_OIDC_ISSUER", "oidc-issuer", "", "OpenID Connect issuer URL for single sign-on: bearer JWTs are accepted beside API keys, and the console offers a login (empty: off). See docs/security.md.", setString(func(c *Config) *string { return &c.OIDC.Issuer })},
	{"REDRIVE_OIDC_CLIENT_ID", "oidc-client-id", "", "Redrive's client id at the identity provider; every token's audience must hold it.", setString(func(c *Config) *string { return &c.OIDC.ClientID })},
	{"REDRIVE_OIDC_CLIENT_SECRET", "oidc-client-secret", "", "Client secret for the console login (empty: a public client; the login uses PKCE either way).", setString(func(c *Config) *string { return &c.OIDC.ClientSecret })},
	{"REDRIVE_OIDC_REDIRECT_URL", "oidc-redirect-url", "", "The console login's callback as the provider is told it, ending in /auth/callback (e.g. https://redrive.example.com/auth/callback); empty: bearer tokens only.", setString(func(c *Config) *string { return &c.OIDC.RedirectURL })},
	{"REDRIVE_OIDC_SCOPES", "oidc-scopes", "openid,email,profile", "Scopes the console login asks for, comma-separated (add groups where the provider needs it).", setList(func(c *Config) *[]string { return &c.OIDC.Scopes })},
	{"REDRIVE_OIDC_GROUPS_CLAIM", "oidc-groups-claim", "groups", "Token claim holding the person's groups; a dotted name reaches into objects (Keycloak: realm_access.roles).", setString(func(c *Config) *string { return &c.OIDC.GroupsClaim })},
	{"REDRIVE_OIDC_SESSION_TTL", "oidc-session-ttl", "8h", "How long a console login lasts before the person logs in again.", setDuration(func(c *Config) *time.Duration { return &c.OIDC.SessionTTL })},
	{"REDRIVE_OIDC_SESSION_KEY", "oidc-session-key", "", "Base64 of 32 random bytes sealing console session cookies (openssl rand -base64 32); empty: generated at start, so sessions end at a restart and work on one replica only.", setString(func(c *Config) *string { return &c.OIDC.SessionKey })},
	{"REDRIVE_ROLES_FILE", "roles-file", "", "YAML file mapping identity-provider groups, subjects and emails to roles that grant actions on queue globs (required with REDRIVE_OIDC_ISSUER).", setString(func(c *Config) *string { return &c.RolesFile })},
	{"REDRIVE_MIGRATE_ON_START", "migrate", "false", "Apply pending schema migrations at start.", setBool(func(c *Config) *bool { return &c.MigrateOnStart })},
	{"REDRIVE_LOG_LEVEL", "log-level", "info", "Log level: debug, info, warn, error.", setEnum(func(c *Config) *string { return &c.LogLevel }, "debug", "info", "warn", "error")},
	{"REDRIVE_LOG_FORMAT", "log-format", "text", "Log format: text or json.", setEnum(func(c *Config) *string { return &c.LogFormat }, "text", "json")},
	{"REDRIVE_TRACE_URL", "trace-url", "", "URL of a trace in your tracing UI, {trace_id} standing for the trace id (e.g. https://jaeger.example/trace/{trace_id}): the console links a record's trace_id to it (empty: shown unlinked). Tracing itself is configured by the OTEL_* variables, see docs/operations.md.", setTraceURL},
	{"REDRIVE_SHUTDOWN_GRACE", "shutdown-grace", "15s", "How long to wait for in-flight work at shutdown.", setDuration(func(c *Config) *time.Duration { return &c.ShutdownGrace })},
	{"REDRIVE_KAFKA_TLS", "kafka-tls", "false", "Connect to Kafka over TLS.", setBool(func(c *Config) *bool { return &c.Kafka.TLS })},
	{"REDRIVE_KAFKA_TLS_CA_FILE", "kafka-tls-ca-file", "", "PEM CA bundle for Kafka TLS (default: system roots).", setString(func(c *Config) *string { return &c.Kafka.TLSCAFile })},
	{"REDRIVE_KAFKA_TLS_CERT_FILE", "kafka-tls-cert-file", "", "PEM client certificate for Kafka mTLS.", setString(func(c *Config) *string { return &c.Kafka.TLSCertFile })},
	{"REDRIVE_KAFKA_TLS_KEY_FILE", "kafka-tls-key-file", "", "PEM client key for Kafka mTLS.", setString(func(c *Config) *string { return &c.Kafka.TLSKeyFile })},
	{"REDRIVE_KAFKA_TLS_SERVER_NAME", "kafka-tls-server-name", "", "Expected server name in Kafka broker certificates.", setString(func(c *Config) *string { return &c.Kafka.TLSServerName })},
	{"REDRIVE_KAFKA_SASL_MECHANISM", "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (client credentials from REDRIVE_KAFKA_OAUTH_*) or AWS_MSK_IAM (the AWS SDK's default credentials) (empty: none).", setEnum(func(c *Config) *string { return &c.Kafka.SASLMechanism }, "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", mechanismOAuth, mechanismMSK)},
	{"REDRIVE_KAFKA_SASL_USERNAME", "kafka-sasl-username", "", "SASL user name (PLAIN, SCRAM).", setString(func(c *Config) *string { return &c.Kafka.SASLUser })},
	{"REDRIVE_KAFKA_SASL_PASSWORD", "kafka-sasl-password", "", "SASL password (PLAIN, SCRAM).", setString(func(c *Config) *string { return &c.Kafka.SASLPassword })},
	{"REDRIVE_KAFKA_OAUTH_TOKEN_URL", "kafka-oauth-token-url", "", "OAUTHBEARER: the OAuth 2.0 token endpoint (https) of the client-credentials grant; tokens are refreshed before they expire.", setString(func(c *Config) *string { return &c.Kafka.OAuthTokenURL })},
	{"REDRIVE_KAFKA_OAUTH_CLIENT_ID", "kafka-oauth-client-id", "", "OAUTHBEARER: client id.", setString(func(c *Config) *string { return &c.Kafka.OAuthClientID })},
	{"REDRIVE_KAFKA_OAUTH_CLIENT_SECRET", "kafka-oauth-client-secret", "", "OAUTHBEARER: client secret.", setString(func(c *Config) *string { return &c.Kafka.OAuthClientSecret })},
	{"REDRIVE_KAFKA_OAUTH_SCOPES", "kafka-oauth-scopes", "", "OAUTHBEARER: scopes to ask for, comma-separated (empty: none).", setList(func(c *Config) *[]string { return &c.Kafka.OAuthScopes })},
	{"REDRIVE_KAFKA_OAUTH_EXTENSIONS", "kafka-oauth-extensions", "", "OAUTHBEARER: SASL extensions, comma-separated key=value (e.g. Confluent Cloud's logicalCluster=lkc-…,identityPoolId=pool-…).", setList(func(c *Config) *[]string { return &c.Kafka.OAuthExtensions })},
	{"REDRIVE_SCHEMA_REGISTRY_URL", "schema-registry-url", "", "Schema Registry URLs, comma-separated, tried in turn: values and keys in its wire format are decoded to JSON (empty: off). See docs/schema-registry.md.", setList(func(c *Config) *[]string { return &c.SchemaRegistry.URLs })},
	{"REDRIVE_SCHEMA_REGISTRY_USERNAME", "schema-registry-username", "", "Schema Registry basic-auth user name (Confluent Cloud: the API key).", setString(func(c *Config) *string { return &c.SchemaRegistry.Username })},
	{"REDRIVE_SCHEMA_REGISTRY_PASSWORD", "schema-registry-password", "", "Schema Registry basic-auth password (Confluent Cloud: the API secret).", setString(func(c *Config) *string { return &c.SchemaRegistry.Password })},
	{"REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN", "schema-registry-bearer-token", "", "Schema Registry bearer token (instead of basic auth).", setString(func(c *Config) *string { return &c.SchemaRegistry.BearerToken })},
	{"REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE", "schema-registry-tls-ca-file", "", "PEM CA bundle for an https Schema Registry (default: system roots).", setString(func(c *Config) *string { return &c.SchemaRegistry.TLSCAFile })},
	{"REDRIVE_SCHEMA_REGISTRY_TLS_CERT_FILE", "schema-registry-tls-cert-file", "", "PEM client certificate for Schema Registry mTLS.", setString(func(c *Config) *string { return &c.SchemaRegistry.TLSCertFile })},
	{"REDRIVE_SCHEMA_REGISTRY_TLS_KEY_FILE", "schema-registry-tls-key-file", "", "PEM client key for Schema Registry mTLS.", setString(func(c *Config) *string { return &c.SchemaRegistry.TLSKeyFile })},
	{"REDRIVE_SCHEMA_REGISTRY_TIMEOUT", "schema-registry-timeout", "10s", "Longest time one Schema Registry request may take (ingest never waits on it).", setDuration(func(c *Config) *time.Duration { return &c.SchemaRegistry.Timeout })},
}

// DevSettings are the settings of redrive dev alone, in documentation order
// (the README's table lists them beside Settings): serve neither reads them
// nor takes their flags. LoadDev reads them, RegisterDevFlags adds their flags.
var DevSettings = []Setting{
	{"REDRIVE_KAFKA_PORT", "kafka-port", "9092", "redrive dev only: port of its in-process Kafka on 127.0.0.1 (0: any free port). Dev's clients use that broker: REDRIVE_KAFKA_BROKERS and the Kafka TLS and SASL settings do not apply to it.", setPort(func(c *Config) *int { return &c.DevKafkaPort })},
}

// Lookup finds an environment variable; os.LookupEnv in production.
type Lookup func(string) (string, bool)

// Load builds the configuration: defaults, then environment variables, then
// any flags set on fs (registered with RegisterFlags) after parsing.
func Load(lookup Lookup, fs *pflag.FlagSet) (Config, error) {
	return load(lookup, fs, Settings)
}

// LoadDev is Load for redrive dev: Settings and DevSettings (whose flags
// RegisterDevFlags adds).
func LoadDev(lookup Lookup, fs *pflag.FlagSet) (Config, error) {
	return load(lookup, fs, slices.Concat(Settings, DevSettings))
}

func load(lookup Lookup, fs *pflag.FlagSet, settings []Setting) (Config, error) {
	var c Config
	var errs []error
	for _, s := range settings {
		v := s.Default
		source := "default"
		if env, ok := lookup(s.Env); ok {
			v, source = env, s.Env
		}
		if fs != nil {
			if f := fs.Lookup(s.Flag); f != nil && f.Changed {
				v, source = f.Value.String(), "--"+s.Flag
			}
		}
		if err := s.set(&c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.validate()
}

// RegisterFlags adds a flag for every setting; their values are read by Load.
// On/off settings are boolean flags: --kafka-tls alone turns TLS on.
func RegisterFlags(fs *pflag.FlagSet) {
	for _, s := range Settings {
		help := s.Help + " (env " + s.Env + ")"
		if s.isBool() {
			fs.Bool(s.Flag, s.Default == "true", help)
			continue
		}
		fs.String(s.Flag, s.Default, help)
	}
}

// RegisterDevFlags adds a flag for every DevSettings entry (redrive dev's
// own); LoadDev reads them.
func RegisterDevFlags(fs *pflag.FlagSet) {
	for _, s := range DevSettings {
		fs.String(s.Flag, s.Default, s.Help+" (env "+s.Env+")")
	}
}

// isBool reports whether the setting is on/off: its default is true or
// false (every on/off setting has one, and nothing else does).
func (s Setting) isBool() bool { return s.Default == "true" || s.Default == "false" }

func (c *Config) validate() error {
	var errs []error
	if len(c.KafkaBrokers) == 0 {
		errs = append(errs, errors.New("REDRIVE_KAFKA_BROKERS: at least one broker is required"))
	}
	if len(c.DLQTopics) == 0 {
		errs = append(errs, errors.New("REDRIVE_DLQ_TOPICS: at least one topic is required"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("REDRIVE_GROUP: must not be empty"))
	}
	for _, d := range []struct {
		env string
		v   time.Duration
	}{{"REDRIVE_KAFKA_SESSION_TIMEOUT", c.KafkaSessionTimeout}, {"REDRIVE_KAFKA_REBALANCE_TIMEOUT", c.KafkaRebalanceTimeout}} {
		switch {
		case d.v <= 0:
			errs = append(errs, fmt.Errorf("%s: must be positive (e.g. 45s)", d.env))
		case d.v < minGroupTimeout:
			errs = append(errs, fmt.Errorf("%s: %v is below the minimum of %v", d.env, d.v, minGroupTimeout))
		case d.v > maxGroupTimeout:
			errs = append(errs, fmt.Errorf("%s: %v is above the maximum of %v", d.env, d.v, maxGroupTimeout))
		}
	}
	if c.RetryMinInterval <= 0 || c.RetryMinInterval > maxRetryMinInterval {
		errs = append(errs, fmt.Errorf("REDRIVE_RETRY_MIN_INTERVAL: must be greater than zero and at most %v, got %v", maxRetryMinInterval, c.RetryMinInterval))
	}
	if c.EventsWriteTimeout <= 0 {
		errs = append(errs, errors.New("REDRIVE_EVENTS_WRITE_TIMEOUT: must be positive (e.g. 10s)"))
	}
	if (c.Kafka.TLSCertFile == "") != (c.Kafka.TLSKeyFile == "") {
		errs = append(errs, errors.New("REDRIVE_KAFKA_TLS_CERT_FILE and REDRIVE_KAFKA_TLS_KEY_FILE: set both or neither"))
	}
	errs = append(errs, c.Kafka.validateIdentity()...)
	errs = append(errs, c.SchemaRegistry.validate()...)
	errs = append(errs, c.validateOIDC()...)
	return errors.Join(errs...)
}

func (s SchemaRegistry) validate() []error {
	var errs []error
	for _, u := range s.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("REDRIVE_SCHEMA_REGISTRY_URL: %q is not an http(s) URL", u))
		}
	}
	if s.Password != "" && s.Username == "" {
		errs = append(errs, errors.New("REDRIVE_SCHEMA_REGISTRY_USERNAME: required when a password is set"))
	}
	if s.Username != "" && s.BearerToken != "" {
		errs = append(errs, errors.New("REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN: set either it or a username and password, not both"))
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		errs = append(errs, errors.New("REDRIVE_SCHEMA_REGISTRY_TLS_CERT_FILE and REDRIVE_SCHEMA_REGISTRY_TLS_KEY_FILE: set both or neither"))
	}
	if s.Timeout <= 0 {
		errs = append(errs, errors.New("REDRIVE_SCHEMA_REGISTRY_TIMEOUT: must be positive (e.g. 10s)"))
	}
	if !s.Enabled() && (s.Username != "" || s.BearerToken != "" || s.TLSCAFile != "" || s.TLSCertFile != "") {
		errs = append(errs, errors.New("REDRIVE_SCHEMA_REGISTRY_URL: required when other REDRIVE_SCHEMA_REGISTRY_* settings are set"))
	}
	return errs
}

func (c *Config) validateOIDC() []error {
	var errs []error
	o := c.OIDC
	if !o.Enabled() {
		if o.ClientID != "" || o.ClientSecret != "" || o.RedirectURL != "" || o.SessionKey != "" || c.RolesFile != "" {
			errs = append(errs, errors.New("REDRIVE_OIDC_ISSUER: required when other REDRIVE_OIDC_* settings or REDRIVE_ROLES_FILE are set"))
		}
		return errs
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("REDRIVE_OIDC_ISSUER: %q is not an http(s) URL", o.Issuer))
	}
	if o.ClientID == "" {
		errs = append(errs, errors.New("REDRIVE_OIDC_CLIENT_ID: required with REDRIVE_OIDC_ISSUER (tokens must name it as their audience)"))
	}
	if c.RolesFile == "" {
		errs = append(errs, errors.New("REDRIVE_ROLES_FILE: required with REDRIVE_OIDC_ISSUER (without roles nobody may do anything)"))
	}
	if o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "/auth/callback" {
			errs = append(errs, fmt.Errorf("REDRIVE_OIDC_REDIRECT_URL: want this server's http(s) URL ending in /auth/callback, got %q", o.RedirectURL))
		}
	}
	if o.GroupsClaim == "" {
		errs = append(errs, errors.New("REDRIVE_OIDC_GROUPS_CLAIM: must not be empty"))
	}
	if o.SessionTTL <= 0 {
		errs = append(errs, errors.New("REDRIVE_OIDC_SESSION_TTL: must be positive (e.g. 8h)"))
	}
	if o.SessionKey != "" {
		if b, err := base64.StdEncoding.DecodeString(o.SessionKey); err != nil || len(b) != 32 {
			errs = append(errs, errors.New("REDRIVE_OIDC_SESSION_KEY: want the base64 of 32 bytes (openssl rand -base64 32)"))
		}
	}
	return errs
}

// setTraceURL takes an http(s) URL template with {trace_id} in it.
func setTraceURL(c *Config, v string) error {
	v = strings.TrimSpace(v)
	if v != "" {
		u, err := url.Parse(strings.ReplaceAll(v, "{trace_id}", "0"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("want an http or https URL, got %q", v)
		}
		if !strings.Contains(v, "{trace_id}") {
			return fmt.Errorf("want {trace_id} where the trace id goes, got %q", v)
		}
	}
	c.TraceURL = v
	return nil
}

func setString(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = strings.TrimSpace(v); return nil }
}

func setList(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		*field(c) = out
		return nil
	}
}

func setBool(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a boolean (want true or false)", v)
		}
		*field(c) = b
		return nil
	}
}

func setDuration(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration (want e.g. 15s, 2m)", v)
		}
		*field(c) = d
		return nil
	}
}

// setCount parses a partition count or replication factor: -1 for the
// broker's default, or a positive whole number that fits the Kafka field.
func setCount[N int16 | int32](field func(*Config) *N) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n == 0 || n < -1 || int64(N(n)) != n {
			return fmt.Errorf("%q is not -1 (the broker's default) or a positive whole number", v)
		}
		*field(c) = N(n)
		return nil
	}
}

// setPositive parses a whole number of at least 1.
func setPositive(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive whole number", v)
		}
		*field(c) = n
		return nil
	}
}

// setPort parses a TCP port to listen on: 0 (any free one) to 65535.
func setPort(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%q is not a port (want a whole number from 0 to 65535; 0: any free port)", v)
		}
		*field(c) = n
		return nil
	}
}

func setEnum(field func(*Config) *string, allowed ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimSpace(v)
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				*field(c) = a
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
	}
}
