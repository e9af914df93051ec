package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const kedaDir = k8sDir + "/components/keda"

// k8sScaledObject is the part of a KEDA ScaledObject the tests read.
type k8sScaledObject struct {
	Spec struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount int `yaml:"minReplicaCount"`
		MaxReplicaCount int `yaml:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

// The KEDA component scales the StatefulSet the base deploys, on the lag of
// the consumer group and DLQ topic the base configures and on the redelivery
// backlog, never below what the PodDisruptionBudget keeps up; and kustomize
// builds it on top of the base.
func TestKedaComponent(t *testing.T) {
	t.Parallel()
	m := loadK8s(t)
	objs := parseManifestFile(t, path.Join(kedaDir, "scaledobject.yaml"))
	if len(objs) != 1 || objs[0].Kind != "ScaledObject" || objs[0].APIVersion != "keda.sh/v1alpha1" {
		t.Fatalf("%s: want one keda.sh/v1alpha1 ScaledObject, got %d objects", kedaDir, len(objs))
	}
	var so k8sScaledObject
	if err := objs[0].node.Decode(&so); err != nil {
		t.Fatal(err)
	}
	ref := so.Spec.ScaleTargetRef
	sts := m.statefulSet(t)
	var stsMeta struct {
		Metadata k8sMeta `yaml:"metadata"`
	}
	m.one(t, "StatefulSet", "", &stsMeta)
	if ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || ref.Name != stsMeta.Metadata.Name {
		t.Errorf("scaleTargetRef %+v does not name the StatefulSet %q", ref, stsMeta.Metadata.Name)
	}
	if so.Spec.MinReplicaCount < 2 || so.Spec.MaxReplicaCount < so.Spec.MinReplicaCount {
		t.Errorf("replicas %d..%d: the minimum must keep the PodDisruptionBudget's survivor (2) and the maximum be above it",
			so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	if sts.Spec.Replicas != nil && so.Spec.MinReplicaCount > *sts.Spec.Replicas {
		t.Errorf("minReplicaCount %d is above the base's %d replicas", so.Spec.MinReplicaCount, *sts.Spec.Replicas)
	}

	cfg, _ := m.data(t, "ConfigMap", "redrive-config")
	types := map[string]map[string]string{}
	for _, tr := range so.Spec.Triggers {
		types[tr.Type] = tr.Metadata
	}
	kafka, ok := types["kafka"]
	if !ok {
		t.Fatal("no kafka trigger (the ingest backlog)")
	}
	if kafka["consumerGroup"] != cfg["REDRIVE_GROUP"] {
		t.Errorf("kafka trigger's consumerGroup %q is not REDRIVE_GROUP %q", kafka["consumerGroup"], cfg["REDRIVE_GROUP"])
	}
	if !slices.Contains(strings.Split(cfg["REDRIVE_DLQ_TOPICS"], ","), kafka["topic"]) {
		t.Errorf("kafka trigger's topic %q is not one of REDRIVE_DLQ_TOPICS %q", kafka["topic"], cfg["REDRIVE_DLQ_TOPICS"])
	}
	if kafka["bootstrapServers"] != cfg["REDRIVE_KAFKA_BROKERS"] {
		t.Errorf("kafka trigger's bootstrapServers %q differ from REDRIVE_KAFKA_BROKERS %q", kafka["bootstrapServers"], cfg["REDRIVE_KAFKA_BROKERS"])
	}
	if kafka["allowIdleConsumers"] != "false" {
		t.Error("the kafka trigger may scale past the partition count (allowIdleConsumers is not false)")
	}
	prom, ok := types["prometheus"]
	if !ok {
		t.Fatal("no prometheus trigger (the redelivery backlog)")
	}
	if !strings.Contains(prom["query"], "redrive_redelivery_due") {
		t.Errorf("prometheus trigger's query %q does not read redrive_redelivery_due", prom["query"])
	}
	for _, tr := range []map[string]string{kafka, prom} {
		th := tr["lagThreshold"] + tr["threshold"]
		if n, err := strconv.Atoi(th); err != nil || n <= 0 {
			t.Errorf("threshold %q is not a positive integer string", th)
		}
	}

	// kustomize builds the component on top of the base.
	overlay := t.TempDir()
	rel := func(dir string) string { // kustomize refuses absolute paths
		r, err := filepath.Rel(overlay, filepath.Join(repoRoot(t), filepath.FromSlash(dir)))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	kust := fmt.Sprintf("resources: [%q]\ncomponents: [%q]\n", rel(k8sDir), rel(kedaDir))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kustomizer(t)(overlay)
	if err != nil {
		t.Fatalf("kustomize with the keda component: %v\n%s", err, out)
	}
	built := 0
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o struct {
			Kind string `yaml:"kind"`
		}
		if dec.Decode(&o) != nil {
			break
		}
		if o.Kind == "ScaledObject" {
			built++
		}
	}
	if built != 1 {
		t.Errorf("the keda component builds %d ScaledObjects, want 1", built)
	}
}
