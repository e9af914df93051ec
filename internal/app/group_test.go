package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// The ingest consumer joins its group as the static member the setting names
// (the timeouts reach the client too: internal/config's TestGroupOpts).
func TestIngestJoinsAsAStaticGroupMember(t *testing.T) {
	b := setup(t, "REDRIVE_GROUP_INSTANCE_ID", "redrive-0",
		"REDRIVE_KAFKA_SESSION_TIMEOUT", "20s", "REDRIVE_KAFKA_REBALANCE_TIMEOUT", "40s")
	adm := kadm.NewClient(kafkatest.Client(t, b.brokers))
	eventually.Nil(t, "a stable static member of the group", func() error {
		groups, err := adm.DescribeGroups(context.Background(), "redrive")
		g, ok := groups["redrive"]
		if err != nil || !ok || g.State != "Stable" || len(g.Members) != 1 {
			return fmt.Errorf("the group is %+v (%v)", groups, err)
		}
		if m := g.Members[0]; m.InstanceID == nil || *m.InstanceID != "redrive-0" {
			t.Fatalf("member %+v, want instance id redrive-0", m)
		}
		return nil
	})
}
