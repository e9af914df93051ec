package deploytest

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/config"
)

// composeFile is the part of docker-compose.yml these tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string         `yaml:"image"`
	Hostname    string         `yaml:"hostname"`
	Build       composeBuild   `yaml:"build"`
	Entrypoint  stringList     `yaml:"entrypoint"`
	Command     stringList     `yaml:"command"`
	Environment composeEnv     `yaml:"environment"`
	Ports       []composePort  `yaml:"ports"`
	DependsOn   composeDepends `yaml:"depends_on"`
	Healthcheck *struct {
		Test stringList `yaml:"test"`
	} `yaml:"healthcheck"`
}

// stringList is a compose string-or-list field (command, entrypoint, test).
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = stringList{n.Value}
		return nil
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*l = s
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list of strings", n.Line)
}

func (l stringList) String() string { return strings.Join(l, " ") }

// composeBuild is `build: .` or `build: {context: ., dockerfile: ...}`.
type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func (b *composeBuild) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	type plain composeBuild
	return n.Decode((*plain)(b))
}

// composeEnv is `environment:` as a map (KEY: value) or a list (KEY=value).
// Numbers and booleans in the map form are kept as written.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	out := composeEnv{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fmt.Errorf("line %d: %s has no value (taken from the host environment?): set it in the file", v.Line, k.Value)
			}
			out[k.Value] = v.Value
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			k, v, ok := strings.Cut(item.Value, "=")
			if !ok {
				return fmt.Errorf("line %d: %s has no value (taken from the host environment?): set it in the file", item.Line, k)
			}
			out[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment must be a map or a list", n.Line)
	}
	*e = out
	return nil
}

// composePort is one published port, in short ("8080:8080",
// "127.0.0.1:8080:8080/tcp") or long ({target: 8080, published: 8080}) syntax.
type composePort struct {
	Published int // 0 when only the container port is given (a random host port)
	Target    int
}

func (p *composePort) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var long struct {
			Target    int    `yaml:"target"`
			Published string `yaml:"published"`
		}
		if err := n.Decode(&long); err != nil {
			return err
		}
		p.Target = long.Target
		if long.Published != "" {
			v, err := strconv.Atoi(long.Published)
			if err != nil {
				return fmt.Errorf("line %d: published port %q: ranges are not supported here", n.Line, long.Published)
			}
			p.Published = v
		}
		return nil
	}
	spec, _, _ := strings.Cut(n.Value, "/")
	parts := strings.Split(spec, ":")
	var err error
	if p.Target, err = strconv.Atoi(parts[len(parts)-1]); err != nil {
		return fmt.Errorf("line %d: port %q: ranges are not supported here", n.Line, n.Value)
	}
	if len(parts) > 1 {
		if p.Published, err = strconv.Atoi(parts[len(parts)-2]); err != nil {
			return fmt.Errorf("line %d: port %q: ranges are not supported here", n.Line, n.Value)
		}
	}
	return nil
}

// composeDepends maps each dependency to its condition; the list form means
// service_started.
type composeDepends map[string]string

func (d *composeDepends) UnmarshalYAML(n *yaml.Node) error {
	out := composeDepends{}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, item := range n.Content {
			out[item.Value] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for name, dep := range m {
			out[name] = dep.Condition
			if dep.Condition == "" {
				out[name] = "service_started"
			}
		}
	default:
		return fmt.Errorf("line %d: depends_on must be a list or a map", n.Line)
	}
	*d = out
	return nil
}

// interpolation is compose's ${VAR:-default} / ${VAR-default} / ${VAR} / $VAR.
var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate resolves s as compose would with an empty host environment:
// ${VAR:-default} becomes its default; a variable without one is an error,
// because the stack must start without any host setup.
func interpolate(s string) (string, error) {
	var err error
	out := interpolation.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := interpolation.FindStringSubmatch(m)
		if strings.Contains(m, "-") {
			return sub[2]
		}
		err = fmt.Errorf("%q needs %s from the host environment; give it a default (${VAR:-value})", s, sub[1]+sub[3])
		return m
	})
	return out, err
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw := readRepoFile(t, "docker-compose.yml")
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for name, svc := range f.Services {
		for k, v := range svc.Environment {
			var err error
			if svc.Environment[k], err = interpolate(v); err != nil {
				t.Fatalf("docker-compose.yml: service %s: %s: %v", name, k, err)
			}
		}
	}
	return f
}

// service returns the service reachable as host on the compose network: by
// service name or by its hostname.
func (f composeFile) service(host string) (string, composeService, bool) {
	if svc, ok := f.Services[host]; ok {
		return host, svc, true
	}
	for name, svc := range f.Services {
		if svc.Hostname == host {
			return name, svc, true
		}
	}
	return "", composeService{}, false
}

// redriveConfig is the configuration the redrive service starts with.
func (f composeFile) redriveConfig(t *testing.T) config.Config {
	t.Helper()
	return loadConfig(t, f.Services["redrive"].Environment)
}

func TestComposeServices(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	for _, name := range []string{"kafka", "postgres", "redrive"} {
		if _, ok := f.Services[name]; !ok {
			t.Errorf("docker-compose.yml: no %s service", name)
		}
	}
	rd, ok := f.Services["redrive"]
	if !ok {
		t.FailNow()
	}
	if rd.Build.Context == "" {
		t.Fatal("redrive: no build: it must build the image from this repository")
	}
	dockerfile := rd.Build.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	ctx := filepath.Join(repoRoot(t), filepath.FromSlash(rd.Build.Context))
	if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
		t.Errorf("redrive: build context %q is not the repository root", rd.Build.Context)
	}
	if _, err := os.Stat(filepath.Join(ctx, dockerfile)); err != nil {
		t.Errorf("redrive: build: %v", err)
	}
	if len(rd.Command) == 0 || rd.Command[0] != "serve" {
		t.Errorf("redrive: command = %q, want serve", rd.Command)
	}
}

// Every variable set on redrive is a Redrive setting and config.Load accepts
// the whole environment.
func TestComposeRedriveConfig(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	env := f.Services["redrive"].Environment
	if err := checkEnvNames(env); err != nil {
		t.Errorf("docker-compose.yml: redrive:\n%v", err)
	}
	cfg := loadConfig(t, env)
	if cfg.DatabaseURL == "" {
		t.Error("redrive: REDRIVE_DATABASE_URL is not set; serve refuses to start without it")
	}
	if !cfg.MigrateOnStart && !f.hasMigrateService() {
		t.Error("redrive: nothing migrates the schema: set REDRIVE_MIGRATE_ON_START=true or add a `redrive migrate up` service")
	}
	if cfg.APIKeysFile == "" && !cfg.AuthDisabled {
		t.Error("redrive: neither REDRIVE_API_KEYS_FILE nor REDRIVE_AUTH_DISABLED=true; serve refuses to start without one")
	}
}

func (f composeFile) hasMigrateService() bool {
	for _, svc := range f.Services {
		if strings.Contains(svc.Command.String(), "migrate up") {
			return true
		}
	}
	return false
}

// The port redrive listens on (REDRIVE_HTTP_ADDR, else its default) is the
// one published.
func TestComposeHTTPPort(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	cfg := f.redriveConfig(t)
	port := addrPort(t, cfg.HTTPAddr)
	var published []composePort
	for _, p := range f.Services["redrive"].Ports {
		if p.Target == port {
			published = append(published, p)
		}
	}
	if len(published) == 0 {
		t.Fatalf("redrive listens on %d (REDRIVE_HTTP_ADDR=%q) but publishes %+v", port, cfg.HTTPAddr, f.Services["redrive"].Ports)
	}
	if published[0].Published != port {
		t.Errorf("redrive: port %d is published as %d; the docs say localhost:%d", port, published[0].Published, port)
	}
	if def := defaultHTTPPort(t); port != def {
		t.Errorf("redrive listens on %d, not on the default %d that the image EXPOSEs", port, def)
	}
}

// kafkaListener is one entry of KAFKA_LISTENERS or KAFKA_ADVERTISED_LISTENERS.
type kafkaListener struct {
	Name string
	Host string
	Port int
}

func parseListeners(s string) ([]kafkaListener, error) {
	var out []kafkaListener
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: want NAME://host:port", item)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", item, err)
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("listener %q: port is not a number", item)
		}
		out = append(out, kafkaListener{name, host, n})
	}
	return out, nil
}

// kafkaBroker is the listener configuration of one compose Kafka service.
type kafkaBroker struct {
	svcName    string
	svc        composeService
	bind       map[string]kafkaListener // by listener name
	advertised []kafkaListener
	protocol   map[string]string // listener name → security protocol
}

func newKafkaBroker(t *testing.T, name string, svc composeService) kafkaBroker {
	t.Helper()
	env := svc.Environment
	b := kafkaBroker{svcName: name, svc: svc, bind: map[string]kafkaListener{}, protocol: map[string]string{}}
	bind, err := parseListeners(env["KAFKA_LISTENERS"])
	if err != nil || len(bind) == 0 {
		t.Fatalf("service %s: KAFKA_LISTENERS %q: %v", name, env["KAFKA_LISTENERS"], err)
	}
	for _, l := range bind {
		b.bind[l.Name] = l
	}
	if b.advertised, err = parseListeners(env["KAFKA_ADVERTISED_LISTENERS"]); err != nil {
		t.Fatalf("service %s: KAFKA_ADVERTISED_LISTENERS: %v", name, err)
	}
	for _, pair := range strings.Split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		if l, p, ok := strings.Cut(strings.TrimSpace(pair), ":"); ok {
			b.protocol[l] = p
		}
	}
	return b
}

// securityProtocol is the listener's protocol; without a map, the listener
// name is the protocol.
func (b kafkaBroker) securityProtocol(listener string) string {
	if p, ok := b.protocol[listener]; ok {
		return p
	}
	return listener
}

// kafkaProtocol is the Kafka security protocol Redrive's settings speak.
func kafkaProtocol(cfg config.Config) string {
	switch {
	case cfg.Kafka.TLS && cfg.Kafka.SASLMechanism != "":
		return "SASL_SSL"
	case cfg.Kafka.TLS:
		return "SSL"
	case cfg.Kafka.SASLMechanism != "":
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// checkBootstrap checks that addr, as used from inside the compose network,
// reaches a Kafka listener that advertises itself back under the same address
// and speaks protocol.
func (f composeFile) checkBootstrap(t *testing.T, who, addr, protocol string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: broker %q: %v", who, addr, err)
		return
	}
	name, svc, ok := f.service(host)
	if !ok {
		t.Errorf("%s: broker %q: no compose service is named %q", who, addr, host)
		return
	}
	b := newKafkaBroker(t, name, svc)
	i := slices.IndexFunc(b.advertised, func(l kafkaListener) bool { return l.Host == host && strconv.Itoa(l.Port) == port })
	if i < 0 {
		t.Errorf("%s: broker %q: service %s advertises no listener at that address (KAFKA_ADVERTISED_LISTENERS=%q): clients would be sent elsewhere after bootstrap",
			who, addr, name, svc.Environment["KAFKA_ADVERTISED_LISTENERS"])
		return
	}
	adv := b.advertised[i]
	l, ok := b.bind[adv.Name]
	if !ok {
		t.Errorf("%s: broker %q: listener %s is advertised but not in KAFKA_LISTENERS", who, addr, adv.Name)
		return
	}
	if strconv.Itoa(l.Port) != port {
		t.Errorf("%s: broker %q: listener %s binds port %d, not %s", who, addr, adv.Name, l.Port, port)
	}
	if got := b.securityProtocol(adv.Name); got != protocol {
		t.Errorf("%s: broker %q: listener %s speaks %s, the client %s", who, addr, adv.Name, got, protocol)
	}
}

// Redrive's brokers resolve to the Kafka service and a listener it really
// serves; the broker's own listener configuration holds together.
func TestComposeKafka(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	cfg := f.redriveConfig(t)
	for _, addr := range cfg.KafkaBrokers {
		f.checkBootstrap(t, "redrive REDRIVE_KAFKA_BROKERS", addr, kafkaProtocol(cfg))
	}

	svc, ok := f.Services["kafka"]
	if !ok {
		t.Fatal("no kafka service")
	}
	b := newKafkaBroker(t, "kafka", svc)
	env := svc.Environment
	roles := strings.Split(env["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") {
		t.Errorf("kafka: KAFKA_PROCESS_ROLES=%q, want broker,controller (single-node KRaft)", env["KAFKA_PROCESS_ROLES"])
	}
	for name := range b.bind {
		if len(b.protocol) > 0 {
			if _, ok := b.protocol[name]; !ok {
				t.Errorf("kafka: listener %s has no entry in KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", name)
			}
		}
	}
	controllers := strings.Split(env["KAFKA_CONTROLLER_LISTENER_NAMES"], ",")
	for _, c := range controllers {
		if _, ok := b.bind[c]; !ok {
			t.Errorf("kafka: controller listener %q is not in KAFKA_LISTENERS", c)
		}
	}
	if ib := env["KAFKA_INTER_BROKER_LISTENER_NAME"]; ib != "" {
		if _, ok := b.bind[ib]; !ok {
			t.Errorf("kafka: KAFKA_INTER_BROKER_LISTENER_NAME %q is not in KAFKA_LISTENERS", ib)
		}
	}
	for _, a := range b.advertised {
		if slices.Contains(controllers, a.Name) {
			t.Errorf("kafka: controller listener %s must not be advertised", a.Name)
		}
	}
	// Voters: id@host:port of this node's controller listener.
	for _, voter := range strings.Split(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], ",") {
		id, addr, ok := strings.Cut(voter, "@")
		host, port, err := net.SplitHostPort(addr)
		if !ok || err != nil {
			t.Errorf("kafka: KAFKA_CONTROLLER_QUORUM_VOTERS entry %q: want id@host:port", voter)
			continue
		}
		if id != env["KAFKA_NODE_ID"] {
			t.Errorf("kafka: voter %q: id is not KAFKA_NODE_ID %q", voter, env["KAFKA_NODE_ID"])
		}
		if name, _, ok := f.service(host); !ok || name != "kafka" {
			t.Errorf("kafka: voter %q: host is not the kafka service", voter)
		}
		if !slices.ContainsFunc(controllers, func(c string) bool { return strconv.Itoa(b.bind[c].Port) == port }) {
			t.Errorf("kafka: voter %q: port is not a controller listener's", voter)
		}
	}
	// Listeners advertised to the host must be published on the same port.
	hostListeners := 0
	for _, a := range b.advertised {
		if a.Host != "localhost" && a.Host != "127.0.0.1" {
			continue
		}
		hostListeners++
		if !slices.Contains(svc.Ports, composePort{Published: a.Port, Target: b.bind[a.Name].Port}) {
			t.Errorf("kafka: listener %s is advertised as %s:%d but port %d is not published to container port %d",
				a.Name, a.Host, a.Port, a.Port, b.bind[a.Name].Port)
		}
	}
	if hostListeners == 0 {
		t.Error("kafka: no listener is advertised on localhost: clients on the host (kcat -b localhost:9092) cannot connect")
	}
}

// Each DLQ topic is created before redrive starts (a consumer does not
// auto-create topics), by a kafka-topics.sh service that reaches the broker.
func TestComposeDLQTopics(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	cfg := f.redriveConfig(t)
	deps := f.Services["redrive"].DependsOn
	bootstrap := regexp.MustCompile(`--bootstrap-server[\s=]+([^\s"'\\]+)`)
	for _, topic := range cfg.DLQTopics {
		word := regexp.MustCompile(`(^|[\s"',=])` + regexp.QuoteMeta(topic) + `($|[\s"',;])`)
		var creator string
		for _, name := range sortedKeys(f.Services) {
			cmd := f.Services[name].Entrypoint.String() + " " + f.Services[name].Command.String()
			if strings.Contains(cmd, "kafka-topics") && strings.Contains(cmd, "--create") && word.MatchString(cmd) {
				creator = name
				m := bootstrap.FindStringSubmatch(cmd)
				if m == nil {
					t.Errorf("service %s: kafka-topics.sh without --bootstrap-server", name)
					continue
				}
				f.checkBootstrap(t, "service "+name+" --bootstrap-server", m[1], "PLAINTEXT")
			}
		}
		if creator == "" {
			t.Errorf("DLQ topic %q (REDRIVE_DLQ_TOPICS) is created by no service (kafka-topics.sh --create)", topic)
			continue
		}
		if deps[creator] != "service_completed_successfully" {
			t.Errorf("redrive: depends_on %s: condition %q, want service_completed_successfully so the topic exists first", creator, deps[creator])
		}
	}
}

// REDRIVE_DATABASE_URL points at the postgres service with its user,
// password and database.
func TestComposePostgres(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	cfg := f.redriveConfig(t)
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatalf("REDRIVE_DATABASE_URL: %v", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		t.Errorf("REDRIVE_DATABASE_URL: scheme %q, want postgres", u.Scheme)
	}
	name, svc, ok := f.service(u.Hostname())
	if !ok {
		t.Fatalf("REDRIVE_DATABASE_URL: host %q is no compose service", u.Hostname())
	}
	if !strings.HasPrefix(svc.Image, "postgres:") {
		t.Errorf("REDRIVE_DATABASE_URL: host %q is service %s, image %q, not Postgres", u.Hostname(), name, svc.Image)
	}
	if port := u.Port(); port != "" && port != "5432" {
		t.Errorf("REDRIVE_DATABASE_URL: port %s; the postgres image listens on 5432", port)
	}
	env := svc.Environment
	wantUser := cmp.Or(env["POSTGRES_USER"], "postgres")
	wantDB := cmp.Or(env["POSTGRES_DB"], wantUser)
	pass, _ := u.User.Password()
	if u.User.Username() != wantUser {
		t.Errorf("REDRIVE_DATABASE_URL: user %q, service %s has POSTGRES_USER %q", u.User.Username(), name, wantUser)
	}
	if pass != env["POSTGRES_PASSWORD"] {
		t.Errorf("REDRIVE_DATABASE_URL: password differs from service %s's POSTGRES_PASSWORD", name)
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != wantDB {
		t.Errorf("REDRIVE_DATABASE_URL: database %q, service %s creates %q (POSTGRES_DB)", db, name, wantDB)
	}
	if u.Query().Get("sslmode") != "disable" {
		t.Error("REDRIVE_DATABASE_URL: the postgres image serves no TLS; add sslmode=disable")
	}
	if svc.Healthcheck == nil || !strings.Contains(svc.Healthcheck.Test.String(), "pg_isready") {
		t.Errorf("service %s: no pg_isready healthcheck", name)
	}
}

// redrive waits until Kafka and Postgres are healthy, and those services
// have a healthcheck that can become healthy.
func TestComposeDependsOn(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	cfg := f.redriveConfig(t)
	deps := f.Services["redrive"].DependsOn
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	need := []string{u.Hostname()}
	for _, addr := range cfg.KafkaBrokers {
		host, _, _ := net.SplitHostPort(addr)
		need = append(need, host)
	}
	for _, host := range need {
		name, svc, ok := f.service(host)
		if !ok {
			t.Errorf("redrive needs %q, which is no compose service", host)
			continue
		}
		if deps[name] != "service_healthy" {
			t.Errorf("redrive: depends_on %s: condition %q, want service_healthy", name, deps[name])
		}
		if svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck, so service_healthy never holds", name)
		}
	}
	for name := range deps {
		if _, ok := f.Services[name]; !ok {
			t.Errorf("redrive: depends_on %s: no such service", name)
		}
	}
}
