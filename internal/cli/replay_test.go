package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/sink/kafka"
)

// replay publishes SENT events again with their original ids, in order,
// through the same Kafka record contract as the relay, and a second run of
// the same command finds its work done.
func TestReplay_RepublishesSentEventsWithOriginalIDsAndResumes(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t) // four SENT Order messages; the dead letters and pending ones are not replayed
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	args := []string{"replay", "--since", "2020-01-01", "--name", "rebuild-billing", "--aggregate-type", "Order",
		"--kafka-brokers", brokers, "--topic-route", "Order=orders", "--kafka-auto-create-topics", "--batch-size", "2"}
	out := f.mustRun(t, exitOK, args...).stdout
	if !strings.Contains(out, "published 4 now, 4 in all") || !strings.Contains(out, "finished") {
		t.Errorf("replay output:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var gotIDs []string
	for len(gotIDs) < 4 && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == kafka.HeaderEventID {
					gotIDs = append(gotIDs, string(h.Value))
				}
			}
		})
	}
	var wantIDs []string
	rows, err := f.pool.Query(ctx, f.sql("SELECT id::text FROM {{schema}}.outbox_messages WHERE status = 'SENT' ORDER BY seq"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		wantIDs = append(wantIDs, id)
	}
	if !slices.Equal(gotIDs, wantIDs) {
		t.Errorf("eventId headers on topic orders = %v, want the SENT messages' ids in order %v", gotIDs, wantIDs)
	}

	out = f.mustRun(t, exitOK, args...).stdout
	if !strings.Contains(out, "published 0 now, 4 in all") {
		t.Errorf("second replay with the same name:\n%s", out)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_audit WHERE action = 'republish'"); n != 2 {
		t.Errorf("%d republish audit entries, want 2", n)
	}
}

func TestReplay_SinceMustBeAFixedTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "--since is required"},
		{[]string{"replay", "--since", "7d"}, "--since"},
		{[]string{"replay", "--since", "2026-03-01", "--rate", "0"}, "--rate must be positive"},
	} {
		res := runCLI(t, nil, tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, res.code, res.stderr)
		}
	}
}

func TestDefaultReplayName_IsStableForTheSameSelection(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a, b := defaultReplayName(since, "Order", ""), defaultReplayName(since.In(time.FixedZone("x", 3600)), "Order", "")
	if a != b || a == defaultReplayName(since, "Invoice", "") || !strings.HasPrefix(a, "replay-") {
		t.Errorf("names %q, %q", a, b)
	}
}
