package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// seedGroups writes, besides the fixture's seed, three dead letters of
// topic orders that the broker refused as too large (Order/50..52), with
// the error text the relay stores, and a message waiting behind Order/50.
func (f *opsFixture) seedGroups(t *testing.T) {
	t.Helper()
	f.seed(t)
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, topic, status, attempts, last_error, created_at)
		SELECT gen_random_uuid(), 'Order', (50 + g)::text, 'OrderPlaced', 1, '{}', 'application/json', '{}', 'orders', 'DEAD_LETTER', 1,
		       'permanent publish error: kafka: publish message ' || gen_random_uuid() || ' to topic orders: MESSAGE_TOO_LARGE: ' ||
		       'The request included a message larger than the max message size the server will accept.', now() - g * interval '1 minute'
		FROM generate_series(0, 2) g`)
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, status, created_at)
		VALUES (gen_random_uuid(), 'Order', '50', 'OrderPaid', 1, '{}', 'application/json', '{}', 'PENDING', now())`)
}

func TestDLQList_GroupShowsCausesWithTheirKeys(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seedGroups(t)
	out := f.mustRun(t, exitOK, "dlq", "list", "--group").stdout
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "GROUP") || !regexp.MustCompile(`^[0-9a-f]{16}\s+3\s+3\s+MESSAGE_TOO_LARGE\s+orders\s+OrderPlaced\s`).MatchString(lines[1]) {
		t.Errorf("dlq list --group does not begin with the three MESSAGE_TOO_LARGE:\n%s", out)
	}
	for _, want := range []string{"max attempts: UNKNOWN_TOPIC_OR_PARTITION  (routed)  OrderPlaced", "(routed): the messages name no topic",
		"outbox dlq replay --group " + lines[1][:16]} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq list --group lacks %q:\n%s", want, out)
		}
	}

	out = f.mustRun(t, exitOK, "dlq", "list", "--group", "--json", "--topic", "orders").stdout
	var got []deadLetterGroupJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dlq list --group --json: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].Key != lines[1][:16] || got[0].Count != 3 || got[0].ErrorClass != "MESSAGE_TOO_LARGE" ||
		!got[0].FirstDeadAt.Before(got[0].LastDeadAt) || !strings.Contains(got[0].LastError, "MESSAGE_TOO_LARGE: The request") {
		t.Errorf("dlq list --group --json --topic orders = %+v", got)
	}
}

func TestDLQReplayAndDiscard_ByGroupChangeExactlyTheGroup(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seedGroups(t)
	var groups []deadLetterGroupJSON
	if err := json.Unmarshal([]byte(f.mustRun(t, exitOK, "dlq", "list", "--group", "--json").stdout), &groups); err != nil {
		t.Fatal(err)
	}
	key := groups[0].Key
	countDead := func() int {
		return f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'DEAD_LETTER'")
	}

	out := f.mustRun(t, exitOK, "dlq", "replay", "--group", key, "--batch-size", "2", "--reason", "limit raised", "--actor", "alice@ops").stdout
	if !strings.Contains(out, "replayed 3 message(s) in 2 transactions") {
		t.Errorf("dlq replay --group:\n%s", out)
	}
	if n := countDead(); n != 2 {
		t.Errorf("%d dead letters after replaying the group, want the fixture's other 2", n)
	}
	if n := f.queryInt(t, `SELECT count(*) FROM {{schema}}.outbox_audit
		WHERE action = 'replay' AND actor = 'alice@ops' AND reason = 'limit raised' AND filter->>'group' = $1`, key); n != 2 {
		t.Errorf("%d audit entries of the group's replay, want one per transaction (2)", n)
	}

	// The fixture's Invoice/7 dead letter is the group of its own.
	if err := json.Unmarshal([]byte(f.mustRun(t, exitOK, "dlq", "list", "--group", "--json", "--aggregate-type", "Invoice").stdout), &groups); err != nil {
		t.Fatal(err)
	}
	res := f.run(t, "dlq", "discard", "--group", groups[0].Key)
	if res.code != exitUsage || !strings.Contains(res.stderr, "--reason is required") {
		t.Errorf("discard --group without a reason: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	out = f.mustRun(t, exitOK, "dlq", "discard", "--group", groups[0].Key, "--reason", "test data").stdout
	if !strings.Contains(out, "discarded 1 message(s)") || f.status(t, seedDead2ID) != "DISCARDED" || f.status(t, seedDeadID) != "DEAD_LETTER" {
		t.Errorf("dlq discard --group: %s / %s\n%s", f.status(t, seedDead2ID), f.status(t, seedDeadID), out)
	}
}

func TestDLQChange_BadBatchSizeOrRateIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"dlq", "replay", "--group", "3f9a2c1b07d4e5a6", "--batch-size", "0"},
		{"dlq", "discard", "--group", "3f9a2c1b07d4e5a6", "--reason", "x", "--rate", "-1"},
		{"dlq", "discard", "--reason", "x"},
		{"dlq", "discard", "--all", "--reason", "x"},
	} {
		if res := runCLI(t, nil, args...); res.code != exitUsage {
			t.Errorf("outbox %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), res.code, exitUsage, res.stderr)
		}
	}
}

// A group's key is 16 hex digits: a shorter or longer one, which could
// name no group or another, is refused before anything is read or changed.
func TestDLQChange_GroupKeyMustBeSixteenHexDigits(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"3f9a2c1b", "3f9a2c1b07d4e5a6f", "3f9a2c1b07d4e5g6"} {
		for _, args := range [][]string{
			{"dlq", "replay", "--group", key},
			{"dlq", "discard", "--group", key, "--reason", "x"},
		} {
			res := runCLI(t, nil, args...)
			if res.code != exitUsage || !strings.Contains(res.stderr, "--group") || !strings.Contains(res.stderr, "16 hex digits") {
				t.Errorf("outbox %s: exit %d, want %d naming --group and its rule; stderr:\n%s", strings.Join(args, " "), res.code, exitUsage, res.stderr)
			}
		}
	}
}

func TestDLQShow_AcceptsTheSeqThatListPrints(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	seq := strings.Fields(strings.Split(f.mustRun(t, exitOK, "dlq", "list").stdout, "\n")[1])[0]
	out := f.mustRun(t, exitOK, "dlq", "show", seq).stdout
	if !strings.Contains(out, seedDeadID) || !strings.Contains(out, "Seq                "+seq) {
		t.Errorf("dlq show %s:\n%s", seq, out)
	}
	if res := f.run(t, "dlq", "show", "999999"); res.code != exitError || !strings.Contains(res.stderr, "not found") {
		t.Errorf("dlq show of an unknown seq: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if res := f.run(t, "dlq", "show", "-3"); res.code != exitUsage {
		t.Errorf("dlq show -3: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}
