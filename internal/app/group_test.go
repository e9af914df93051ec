package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/redrive/redrive/internal/kafkatest"
)

// The ingest consumer joins its group as the static member the setting names
// (the timeouts reach the client too: internal/config's TestGroupOpts).
func TestIngestJoinsAsAStaticGroupMember(t *testing.T) {
	b := setup(t, "REDRIVE_GROUP_INSTANCE_ID", "redrive-0",
		"REDRIVE_KAFKA_SESSION_TIMEOUT", "20s", "REDRIVE_KAFKA_REBALANCE_TIMEOUT", "40s")
	adm := kadm.NewClient(kafkatest.Client(t, b.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		groups, err := adm.DescribeGroups(ctx, "redrive")
		if ctx.Err() != nil {
			t.Fatalf("the group never showed a stable static member: %v %+v", err, groups)
		}
		if g, ok := groups["redrive"]; err == nil && ok && g.State == "Stable" && len(g.Members) == 1 {
			if m := g.Members[0]; m.InstanceID == nil || *m.InstanceID != "redrive-0" {
				t.Fatalf("member %+v, want instance id redrive-0", m)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}
