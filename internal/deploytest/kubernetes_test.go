package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/policy"
)

// k8sDir holds the base manifests and their kustomization.yaml.
const k8sDir = "deploy/kubernetes"

// exampleSecret is the Secret manifest that documents the keys; it is not
// applied by the kustomization (real credentials come from a secret store).
const exampleSecret = "secret.example.yaml"

type k8sMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// k8sObject is one YAML document of a manifest file.
type k8sObject struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	where      string  // file:line
	node       *yaml.Node
}

// intOrString is a Kubernetes IntOrString (ports, minAvailable).
type intOrString string

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error { *v = intOrString(n.Value); return nil }

// k8sStatefulSet is the processor's workload. A StatefulSet for its stable pod
// names: they are the ingest consumer's static group membership.
type k8sStatefulSet struct {
	Spec struct {
		Replicas            *int   `yaml:"replicas"`
		ServiceName         string `yaml:"serviceName"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Selector            struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta    `yaml:"metadata"`
			Spec     k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	InitContainers []k8sContainer `yaml:"initContainers"`
	Containers     []k8sContainer `yaml:"containers"`
	Volumes        []k8sVolume    `yaml:"volumes"`
}

type k8sKeyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type k8sContainer struct {
	Name    string    `yaml:"name"`
	Image   string    `yaml:"image"`
	Command []string  `yaml:"command"`
	Args    []string  `yaml:"args"`
	Ports   []k8sPort `yaml:"ports"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef     *k8sKeyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef  *k8sKeyRef `yaml:"configMapKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		Prefix       string     `yaml:"prefix"`
		ConfigMapRef *k8sKeyRef `yaml:"configMapRef"`
		SecretRef    *k8sKeyRef `yaml:"secretRef"`
	} `yaml:"envFrom"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		RunAsUser                *int  `yaml:"runAsUser"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []k8sVolumeMount `yaml:"volumeMounts"`
}

type k8sVolumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
}

type k8sPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sKeyPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type k8sVolume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string       `yaml:"name"`
		Items []k8sKeyPath `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string       `yaml:"secretName"`
		Items      []k8sKeyPath `yaml:"items"`
	} `yaml:"secret"`
}

type k8sService struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string      `yaml:"name"`
			Port       int         `yaml:"port"`
			TargetPort intOrString `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPDB struct {
	Spec struct {
		MinAvailable   *intOrString `yaml:"minAvailable"`
		MaxUnavailable *intOrString `yaml:"maxUnavailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

type k8sData struct {
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type kustomization struct {
	Resources []string   `yaml:"resources"`
	Images    []k8sImage `yaml:"images"`
}

type k8sImage struct {
	Name string `yaml:"name"`
}

// k8sManifests is what the kustomization applies, plus the example Secret.
type k8sManifests struct {
	kustomization kustomization
	objects       []k8sObject
	secret        k8sObject // from secret.example.yaml
}

func parseManifestFile(t *testing.T, rel string) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readRepoFile(t, rel)))
	var out []k8sObject
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
			continue // an empty document
		}
		obj := k8sObject{where: fmt.Sprintf("%s:%d", rel, n.Content[0].Line), node: &n}
		if err := n.Decode(&obj); err != nil {
			t.Fatalf("%s: %v", obj.where, err)
		}
		if obj.Kind == "" || obj.APIVersion == "" || obj.Metadata.Name == "" {
			t.Fatalf("%s: a document without kind, apiVersion or metadata.name", obj.where)
		}
		out = append(out, obj)
	}
}

func loadK8s(t *testing.T) k8sManifests {
	t.Helper()
	var m k8sManifests
	if err := yaml.Unmarshal(readRepoFile(t, k8sDir+"/kustomization.yaml"), &m.kustomization); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", k8sDir, err)
	}
	for _, r := range m.kustomization.Resources {
		m.objects = append(m.objects, parseManifestFile(t, path.Join(k8sDir, r))...)
	}
	secrets := parseManifestFile(t, path.Join(k8sDir, exampleSecret))
	if len(secrets) != 1 || secrets[0].Kind != "Secret" {
		t.Fatalf("%s: want exactly one Secret", exampleSecret)
	}
	m.secret = secrets[0]
	return m
}

// one decodes the only object of kind (and name, if given) into v.
func (m k8sManifests) one(t *testing.T, kind, name string, v any) {
	t.Helper()
	var found []k8sObject
	for _, o := range m.objects {
		if o.Kind == kind && (name == "" || o.Metadata.Name == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one %s %q, found %d", k8sDir, kind, name, len(found))
	}
	if err := found[0].node.Decode(v); err != nil {
		t.Fatalf("%s: %v", found[0].where, err)
	}
}

func (m k8sManifests) statefulSet(t *testing.T) k8sStatefulSet {
	t.Helper()
	var d k8sStatefulSet
	m.one(t, "StatefulSet", "", &d)
	return d
}

// data returns the keys of a ConfigMap in the manifests (or of the example
// Secret), and whether it exists.
func (m k8sManifests) data(t *testing.T, kind, name string) (map[string]string, bool) {
	t.Helper()
	objs := m.objects
	if kind == "Secret" {
		objs = []k8sObject{m.secret}
	}
	for _, o := range objs {
		if o.Kind != kind || o.Metadata.Name != name {
			continue
		}
		var d k8sData
		if err := o.node.Decode(&d); err != nil {
			t.Fatalf("%s: %v", o.where, err)
		}
		out := map[string]string{}
		for k, v := range d.Data {
			out[k] = v
		}
		for k, v := range d.StringData {
			out[k] = v
		}
		return out, true
	}
	return nil, false
}

// processor is the container running `redrive serve`.
func processor(t *testing.T, pod k8sPodSpec) k8sContainer {
	t.Helper()
	for _, c := range pod.Containers {
		if slices.Contains(append(slices.Clone(c.Command), c.Args...), "serve") {
			return c
		}
	}
	t.Fatal("the StatefulSet has no container running `redrive serve`")
	return k8sContainer{}
}

// containerEnv resolves a container's environment as the kubelet would:
// envFrom first, then env. Values from Secrets are left out (their example
// values are placeholders); secretFrom says which settings came from one.
func (m k8sManifests) containerEnv(t *testing.T, c k8sContainer) (env map[string]string, secretFrom map[string]bool) {
	t.Helper()
	env, secretFrom = map[string]string{}, map[string]bool{}
	var errs []error
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			d, ok := m.data(t, "ConfigMap", ef.ConfigMapRef.Name)
			if !ok {
				errs = append(errs, fmt.Errorf("envFrom ConfigMap %q is not in the manifests", ef.ConfigMapRef.Name))
			}
			for k, v := range d {
				env[ef.Prefix+k] = v
			}
		case ef.SecretRef != nil:
			d, ok := m.data(t, "Secret", ef.SecretRef.Name)
			if !ok {
				errs = append(errs, fmt.Errorf("envFrom Secret %q is not %s", ef.SecretRef.Name, exampleSecret))
			}
			for k := range d {
				secretFrom[ef.Prefix+k] = true
			}
		}
	}
	for _, e := range c.Env {
		delete(env, e.Name)
		delete(secretFrom, e.Name)
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			d, ok := m.data(t, "Secret", ref.Name)
			if _, hasKey := d[ref.Key]; !ok || !hasKey {
				errs = append(errs, fmt.Errorf("%s: Secret %q key %q is not in %s", e.Name, ref.Name, ref.Key, exampleSecret))
			}
			secretFrom[e.Name] = true
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			d, _ := m.data(t, "ConfigMap", ref.Name)
			v, ok := d[ref.Key]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: ConfigMap %q key %q is not in the manifests", e.Name, ref.Name, ref.Key))
			}
			env[e.Name] = v
		case staticMemberName(e.Name, e.ValueFrom.FieldRef):
			env[e.Name] = examplePodName
		default: // resourceFieldRef, fieldRef: runtime values
			if strings.HasPrefix(e.Name, config.EnvPrefix) {
				errs = append(errs, fmt.Errorf("%s: set from the downward API, which these tests cannot check", e.Name))
			}
			env[e.Name] = ""
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("container %s:\n%v", c.Name, err)
	}
	return env, secretFrom
}

// containerConfig checks a container's environment and returns the
// configuration it starts with.
func (m k8sManifests) containerConfig(t *testing.T, c k8sContainer) config.Config {
	t.Helper()
	env, secretFrom := m.containerEnv(t, c)
	names := maps2(env, secretFrom)
	if err := checkEnvNames(names); err != nil {
		t.Errorf("container %s:\n%v", c.Name, err)
	}
	for _, s := range secretSettings {
		if _, ok := env[s]; ok {
			t.Errorf("container %s: %s comes from a ConfigMap or a literal value; take it from a Secret (secretKeyRef)", c.Name, s)
		}
	}
	for k := range env {
		if !strings.HasPrefix(k, config.EnvPrefix) {
			delete(env, k)
		}
	}
	return loadConfig(t, env)
}

// examplePodName stands for the pod name a setting takes from the downward
// API (metadata.name): a StatefulSet pod's name.
const examplePodName = "redrive-0"

// staticMemberName reports whether the variable is the group instance id
// taken from the pod name, the one setting these tests accept from the
// downward API.
func staticMemberName(name string, ref *struct {
	FieldPath string `yaml:"fieldPath"`
}) bool {
	return name == "REDRIVE_GROUP_INSTANCE_ID" && ref != nil && ref.FieldPath == "metadata.name"
}

// maps2 is the union of the keys of env and secretFrom.
func maps2(env map[string]string, secretFrom map[string]bool) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for k := range secretFrom {
		out[k] = ""
	}
	return out
}

// portOf resolves a probe or Service port (a number or a container port name).
func portOf(c k8sContainer, p intOrString) (int, bool) {
	if n, err := strconv.Atoi(string(p)); err == nil {
		return n, true
	}
	for _, cp := range c.Ports {
		if cp.Name == string(p) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// selects reports whether a label selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The kustomization lists every manifest, they are namespace-agnostic, and
// kustomize builds them.
func TestKustomization(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	listed := map[string]bool{}
	for _, r := range m.kustomization.Resources {
		listed[path.Clean(r)] = true
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), k8sDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "kustomization.yaml" || name == exampleSecret || (path.Ext(name) != ".yaml" && path.Ext(name) != ".yml") {
			continue
		}
		if !listed[name] {
			t.Errorf("%s/%s is not in kustomization.yaml's resources", k8sDir, name)
		}
	}
	for _, o := range append(slices.Clone(m.objects), m.secret) {
		if o.Metadata.Namespace != "" {
			t.Errorf("%s: %s %s sets namespace %q; leave it to `kubectl -n` or an overlay", o.where, o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
	}
	for _, kind := range []string{"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"} {
		if !slices.ContainsFunc(m.objects, func(o k8sObject) bool { return o.Kind == kind }) {
			t.Errorf("%s: no %s", k8sDir, kind)
		}
	}
	// The images transformer must name the image the containers use.
	d := m.statefulSet(t)
	for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
		name, _, _ := strings.Cut(c.Image, "@")
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			name = name[:i]
		}
		if !slices.ContainsFunc(m.kustomization.Images, func(img k8sImage) bool { return img.Name == name }) {
			t.Errorf("container %s: image %s is not in kustomization.yaml's images, so overlays cannot pin it", c.Name, name)
		}
	}

	build := kustomizer(t)
	out, err := build(filepath.Join(repoRoot(t), k8sDir))
	if err != nil {
		t.Errorf("kustomize %s: %v\n%s", k8sDir, err, out)
	}
	// The Kafka TLS example overlay mounts its secret where its settings point.
	tls, err := build(filepath.Join(repoRoot(t), "deploy", "examples", "kafka-tls"))
	if err != nil {
		t.Errorf("kustomize deploy/examples/kafka-tls: %v\n%s", err, tls)
	}
	for _, want := range []string{`REDRIVE_KAFKA_TLS: "true"`, "REDRIVE_KAFKA_TLS_CA_FILE: /etc/redrive/kafka-tls/ca.crt",
		"mountPath: /etc/redrive/kafka-tls", "secretName: redrive-kafka-tls"} {
		if !bytes.Contains(tls, []byte(want)) {
			t.Errorf("the kafka-tls example lacks %q", want)
		}
	}
	// The optional ServiceMonitor component builds on top of the base.
	overlay := t.TempDir()
	rel := func(dir string) string { // kustomize refuses absolute paths
		r, err := filepath.Rel(overlay, filepath.Join(repoRoot(t), filepath.FromSlash(dir)))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	kust := fmt.Sprintf("resources: [%q]\ncomponents: [%q]\n", rel(k8sDir), rel(k8sDir+"/components/servicemonitor"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = build(overlay)
	if err != nil {
		t.Errorf("kustomize with the servicemonitor component: %v\n%s", err, out)
	} else if !bytes.Contains(out, []byte("kind: ServiceMonitor")) {
		t.Error("the servicemonitor component adds no ServiceMonitor")
	}
}

// Every container's environment is Redrive configuration that config.Load
// accepts, secrets come from the Secret, and every container runs the same image.
func TestKubernetesConfig(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	pod := m.statefulSet(t).Spec.Template.Spec
	main := processor(t, pod)
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		m.containerConfig(t, c)
		if c.Image != main.Image {
			t.Errorf("container %s: image %s differs from the processor's %s", c.Name, c.Image, main.Image)
		}
		needsDB := c.Name == main.Name || slices.Contains(append(slices.Clone(c.Command), c.Args...), "migrate")
		if _, secretFrom := m.containerEnv(t, c); needsDB && !secretFrom["REDRIVE_DATABASE_URL"] {
			t.Errorf("container %s gets no REDRIVE_DATABASE_URL from the Secret", c.Name)
		}
	}
	// A secret in a ConfigMap leaks even when env overrides it.
	for _, o := range m.objects {
		if o.Kind != "ConfigMap" {
			continue
		}
		d, _ := m.data(t, "ConfigMap", o.Metadata.Name)
		for _, s := range secretSettings {
			if _, ok := d[s]; ok {
				t.Errorf("%s: ConfigMap %s holds %s; it belongs in the Secret", o.where, o.Metadata.Name, s)
			}
		}
	}
}

// The processor listens where the ports, probes, Service and scrape
// annotations say.
func TestKubernetesPorts(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	d := m.statefulSet(t)
	pod := d.Spec.Template.Spec
	c := processor(t, pod)
	cfg := m.containerConfig(t, c)
	port := addrPort(t, cfg.HTTPAddr)

	if !slices.ContainsFunc(c.Ports, func(p k8sPort) bool { return p.ContainerPort == port }) {
		t.Errorf("container %s: no containerPort %d (REDRIVE_HTTP_ADDR %q)", c.Name, port, cfg.HTTPAddr)
	}
	for _, p := range []struct {
		name  string
		probe *k8sProbe
		path  string
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no %s httpGet", c.Name, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("container %s: %s path %q, want %s", c.Name, p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got, ok := portOf(c, p.probe.HTTPGet.Port); !ok || got != port {
			t.Errorf("container %s: %s port %q is not the HTTP port %d", c.Name, p.name, p.probe.HTTPGet.Port, port)
		}
	}

	labels := d.Spec.Template.Metadata.Labels
	if !selects(d.Spec.Selector.MatchLabels, labels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v", d.Spec.Selector.MatchLabels, labels)
	}
	var svc k8sService
	m.one(t, "Service", "", &svc)
	if !selects(svc.Spec.Selector, labels) {
		t.Errorf("Service selector %v does not match the pod labels %v", svc.Spec.Selector, labels)
	}
	served := false
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort
		if target == "" {
			target = intOrString(strconv.Itoa(sp.Port))
		}
		got, ok := portOf(c, target)
		if !ok {
			t.Errorf("Service port %s: targetPort %q is no port of container %s", sp.Name, target, c.Name)
		}
		served = served || got == port
	}
	if !served {
		t.Errorf("no Service port targets the HTTP port %d", port)
	}

	ann := d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		t.Error("pod template: no prometheus.io/scrape annotation")
	}
	if ann["prometheus.io/port"] != strconv.Itoa(port) {
		t.Errorf("pod template: prometheus.io/port %q, the HTTP port is %d", ann["prometheus.io/port"], port)
	}
	if p := ann["prometheus.io/path"]; p != "" && p != "/metrics" {
		t.Errorf("pod template: prometheus.io/path %q, metrics are at /metrics", p)
	}
}

// Containers run as non-root on a read-only root filesystem, with resources set.
func TestKubernetesSecurity(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	pod := m.statefulSet(t).Spec.Template.Spec
	podNonRoot := pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
	if u := pod.SecurityContext.RunAsUser; u != nil && *u == 0 {
		t.Error("pod securityContext.runAsUser is 0 (root)")
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		nonRoot := podNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			t.Errorf("container %s: runAsNonRoot is not true", c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("container %s: runAsUser 0 (root)", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: capabilities are not dropped (drop: [ALL])", c.Name)
		}
		for _, r := range []string{"cpu", "memory"} {
			if c.Resources.Requests[r] == "" {
				t.Errorf("container %s: no resources.requests.%s", c.Name, r)
			}
		}
		if c.Resources.Limits["memory"] == "" {
			t.Errorf("container %s: no resources.limits.memory", c.Name)
		}
	}
}

// Several replicas, a PodDisruptionBudget that lets a drain proceed, and
// enough grace for a clean shutdown.
func TestKubernetesAvailability(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	d := m.statefulSet(t)
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas < 2 {
		t.Errorf("StatefulSet: %d replica(s); run at least 2 so a restart does not stop ingest", replicas)
	}
	var pdb k8sPDB
	m.one(t, "PodDisruptionBudget", "", &pdb)
	if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pod labels", pdb.Spec.Selector.MatchLabels)
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		if n, err := strconv.Atoi(string(*pdb.Spec.MinAvailable)); err == nil && n >= replicas {
			t.Errorf("PodDisruptionBudget minAvailable %d with %d replicas blocks every node drain", n, replicas)
		}
	case pdb.Spec.MaxUnavailable != nil:
		if *pdb.Spec.MaxUnavailable == "0" || *pdb.Spec.MaxUnavailable == "0%" {
			t.Error("PodDisruptionBudget maxUnavailable 0 blocks every node drain")
		}
	default:
		t.Error("PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	}

	pod := d.Spec.Template.Spec
	cfg := m.containerConfig(t, processor(t, pod))
	grace := 30 * time.Second // the Kubernetes default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if cfg.ShutdownGrace >= grace {
		t.Errorf("REDRIVE_SHUTDOWN_GRACE %v is not below terminationGracePeriodSeconds (%v): the kubelet kills redrive mid-shutdown", cfg.ShutdownGrace, grace)
	}
}

// Something applies the migrations before `serve` checks the schema.
func TestKubernetesMigrations(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	pod := m.statefulSet(t).Spec.Template.Spec
	if m.containerConfig(t, processor(t, pod)).MigrateOnStart {
		return
	}
	for _, c := range pod.InitContainers {
		if slices.Equal(append(slices.Clone(c.Command), c.Args...), []string{"migrate", "up"}) {
			return
		}
	}
	for _, o := range m.objects {
		if o.Kind == "Job" {
			var job struct {
				Spec struct {
					Template struct {
						Spec k8sPodSpec `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if err := o.node.Decode(&job); err != nil {
				t.Fatal(err)
			}
			for _, c := range job.Spec.Template.Spec.Containers {
				if slices.Equal(c.Args, []string{"migrate", "up"}) {
					return
				}
			}
		}
	}
	t.Error("nothing runs `redrive migrate up` (init container or Job) and REDRIVE_MIGRATE_ON_START is false: serve refuses an outdated schema")
}

// The policies directory and every *_FILE setting are mounted from
// ConfigMaps and Secrets that hold them, and the mounted policies load.
func TestKubernetesMounts(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	pod := m.statefulSet(t).Spec.Template.Spec
	c := processor(t, pod)
	cfg := m.containerConfig(t, c)

	// mounted returns the volume mounted at dir and the file names it holds.
	mounted := func(dir string) (k8sVolume, map[string]string, bool) {
		for _, vm := range c.VolumeMounts {
			if path.Clean(vm.MountPath) != path.Clean(dir) || vm.SubPath != "" {
				continue
			}
			i := slices.IndexFunc(pod.Volumes, func(v k8sVolume) bool { return v.Name == vm.Name })
			if i < 0 {
				t.Errorf("container %s: volumeMount %s has no volume", c.Name, vm.Name)
				return k8sVolume{}, nil, false
			}
			v := pod.Volumes[i]
			var data map[string]string
			var items []k8sKeyPath
			switch {
			case v.ConfigMap != nil:
				d, ok := m.data(t, "ConfigMap", v.ConfigMap.Name)
				if !ok {
					t.Errorf("volume %s: ConfigMap %q is not in the manifests", v.Name, v.ConfigMap.Name)
				}
				data, items = d, v.ConfigMap.Items
			case v.Secret != nil:
				d, ok := m.data(t, "Secret", v.Secret.SecretName)
				if !ok {
					t.Errorf("volume %s: Secret %q is not %s", v.Name, v.Secret.SecretName, exampleSecret)
				}
				data, items = d, v.Secret.Items
			default:
				return v, nil, true
			}
			files := map[string]string{}
			if len(items) == 0 {
				files = data
			}
			for _, it := range items {
				content, ok := data[it.Key]
				if !ok {
					t.Errorf("volume %s: item key %q is not in its source", v.Name, it.Key)
				}
				files[it.Path] = content
			}
			return v, files, true
		}
		return k8sVolume{}, nil, false
	}

	// Every volume has a known source and is mounted somewhere.
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil {
			if _, ok := m.data(t, "ConfigMap", v.ConfigMap.Name); !ok {
				t.Errorf("volume %s: ConfigMap %q is not in the manifests", v.Name, v.ConfigMap.Name)
			}
		}
		if v.Secret != nil {
			if _, ok := m.data(t, "Secret", v.Secret.SecretName); !ok {
				t.Errorf("volume %s: Secret %q is not %s", v.Name, v.Secret.SecretName, exampleSecret)
			}
		}
		if !slices.ContainsFunc(slices.Concat(pod.InitContainers, pod.Containers), func(c k8sContainer) bool {
			return slices.ContainsFunc(c.VolumeMounts, func(vm k8sVolumeMount) bool { return vm.Name == v.Name })
		}) {
			t.Errorf("volume %s is mounted by no container", v.Name)
		}
	}

	v, files, ok := mounted(cfg.PoliciesDir)
	switch {
	case !ok:
		t.Errorf("REDRIVE_POLICIES_DIR %q is not a volume mount of container %s", cfg.PoliciesDir, c.Name)
	case v.ConfigMap == nil:
		t.Errorf("REDRIVE_POLICIES_DIR %q: volume %s is not a ConfigMap", cfg.PoliciesDir, v.Name)
	default:
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		set, err := policy.LoadDir(dir)
		if err != nil {
			t.Errorf("the policies ConfigMap %s does not load:\n%v", v.ConfigMap.Name, err)
		} else if len(set.Files()) == 0 {
			t.Errorf("the policies ConfigMap %s holds no *.yaml file", v.ConfigMap.Name)
		}
	}

	for _, f := range []struct{ env, value string }{
		{"REDRIVE_API_KEYS_FILE", cfg.APIKeysFile},
		{"REDRIVE_KAFKA_TLS_CA_FILE", cfg.Kafka.TLSCAFile},
		{"REDRIVE_KAFKA_TLS_CERT_FILE", cfg.Kafka.TLSCertFile},
		{"REDRIVE_KAFKA_TLS_KEY_FILE", cfg.Kafka.TLSKeyFile},
	} {
		if f.value == "" {
			continue
		}
		_, files, ok := mounted(path.Dir(f.value))
		if !ok {
			t.Errorf("%s %q: its directory is not a volume mount of container %s", f.env, f.value, c.Name)
			continue
		}
		if _, ok := files[path.Base(f.value)]; files != nil && !ok {
			t.Errorf("%s %q: the volume mounted at %s has no file %s", f.env, f.value, path.Dir(f.value), path.Base(f.value))
		}
	}
}

// Ingest is a static group member named after its pod, and the pod names are
// stable: a StatefulSet, so a restarted or rolled pod rejoins under the same
// name instead of leaving its partitions waiting for the session timeout.
func TestKubernetesStaticMembership(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	sts := m.statefulSet(t)
	c := processor(t, sts.Spec.Template.Spec)
	var fromPodName bool
	for _, e := range c.Env {
		if e.Name == "REDRIVE_GROUP_INSTANCE_ID" {
			fromPodName = e.ValueFrom != nil && staticMemberName(e.Name, e.ValueFrom.FieldRef)
		}
	}
	if !fromPodName {
		t.Errorf("container %s: REDRIVE_GROUP_INSTANCE_ID is not the pod name (env valueFrom.fieldRef.fieldPath: metadata.name); "+
			"a shared value makes the replicas fence each other", c.Name)
	}
	if got := m.containerConfig(t, c).GroupInstanceID; got != examplePodName {
		t.Errorf("container %s: the group instance id is %q, want the pod name", c.Name, got)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("StatefulSet: podManagementPolicy %q; want Parallel (replicas need no start order)", sts.Spec.PodManagementPolicy)
	}
	var svc struct {
		Metadata k8sMeta `yaml:"metadata"`
	}
	m.one(t, "Service", "", &svc)
	if sts.Spec.ServiceName != svc.Metadata.Name {
		t.Errorf("StatefulSet: serviceName %q is not the Service %q", sts.Spec.ServiceName, svc.Metadata.Name)
	}
}

// kustomizer returns a function that builds a kustomization directory with
// the kustomize binary (.ci/run installs it) or, failing that, kubectl's
// built-in kustomize. Neither is a failure, not a skip: the deploy files
// must be checked where they are shipped from.
func kustomizer(t *testing.T) func(dir string) ([]byte, error) {
	t.Helper()
	if bin, err := exec.LookPath("kustomize"); err == nil {
		return func(dir string) ([]byte, error) {
			return exec.CommandContext(t.Context(), bin, "build", dir).CombinedOutput()
		}
	}
	if bin, err := exec.LookPath("kubectl"); err == nil {
		return func(dir string) ([]byte, error) {
			return exec.CommandContext(t.Context(), bin, "kustomize", dir).CombinedOutput()
		}
	}
	t.Fatal("neither kustomize nor kubectl is installed; install kustomize: " +
		"go install sigs.k8s.io/kustomize/kustomize/v5@v5.7.1 (.ci/run does)")
	return nil
}
