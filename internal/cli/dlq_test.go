package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDLQList_ListsDeadLettersWithFilters(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "dlq", "list").stdout
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") ||
		!strings.Contains(lines[1], seedDeadID) || !strings.Contains(lines[1], "Order/42") || !strings.Contains(lines[1], "UNKNOWN_TOPIC_OR_PARTITION") ||
		!strings.Contains(lines[2], seedDead2ID) {
		t.Errorf("dlq list:\n%s", out)
	}

	out = f.mustRun(t, exitOK, "dlq", "list", "--aggregate-type", "Invoice", "--json").stdout
	var got []deadLetterJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dlq list --json: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].ID.String() != seedDead2ID || got[0].LastError != "MESSAGE_TOO_LARGE" {
		t.Errorf("dlq list --aggregate-type Invoice --json = %+v", got)
	}
	for _, args := range [][]string{
		{"--event-type", "Nope"}, {"--aggregate-id", "999"}, {"--since", "2999-01-01"},
	} {
		out := f.mustRun(t, exitOK, append([]string{"dlq", "list"}, args...)...).stdout
		if strings.TrimSpace(out) != "no dead letters" {
			t.Errorf("dlq list %v:\n%s", args, out)
		}
	}
	if out := f.mustRun(t, exitOK, "dlq", "list", "--since", "24h", "--event-type", "OrderPlaced").stdout; !strings.Contains(out, seedDeadID) {
		t.Errorf("dlq list --since 24h --event-type OrderPlaced:\n%s", out)
	}
	res := f.run(t, "dlq", "list", "--since", "yesterday")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--since") {
		t.Errorf("bad --since: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func TestDLQShow_ShowsPayloadHeadersAndEveryAttempt(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "dlq", "show", seedDeadID).stdout
	for _, want := range []string{
		"Status             DEAD_LETTER", "Aggregate          Order/42", "tenant: acme", `"amount": "150.00"`,
		"1  ", "request timed out", "UNKNOWN_TOPIC_OR_PARTITION: topic orders does not exist", "Waiting behind it  1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, out)
		}
	}
	out = f.mustRun(t, exitOK, "dlq", "show", seedDeadID, "--json").stdout
	var got detailOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dlq show --json: %v\n%s", err, out)
	}
	if got.Payload == nil || *got.Payload != `{"orderId":"42","amount":"150.00"}` || got.Headers["tenant"] != "acme" ||
		len(got.History) != 2 || got.History[0].Error != "request timed out" || !got.History[1].Dead {
		t.Errorf("dlq show --json = %+v", got)
	}

	res := f.run(t, "dlq", "show", "0190a1c2-0000-7000-8000-000000000000")
	if res.code != exitError || !strings.Contains(res.stderr, "not found") {
		t.Errorf("show unknown id: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	res = f.run(t, "dlq", "show", "not-a-uuid")
	if res.code != exitUsage {
		t.Errorf("show bad id: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// A dead letter whose headers column cannot be read as headers (a row
// written with plain SQL before migration 015) is shown, with the reason
// and the column as stored instead of its headers, and can be discarded.
func TestDLQShow_HeadersThatCannotBeReadAreShownAsStored(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	const id = "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f70"
	reason := `permanent publish error: relay: message ` + id + ` not published: outbox: invalid message: headers["x"]: value must be a string, is a number`
	// Triggers off for the INSERT (the tests run as a superuser), as before
	// migration 015.
	f.exec(t, `BEGIN; SET LOCAL session_replication_role = replica;
		INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, status, attempts, last_error)
		VALUES ('`+id+`', 'Order', '9', 'OrderPlaced', 1, '{}', 'application/json', '{"x": 1}', 'DEAD_LETTER', 1, $$`+reason+`$$);
		COMMIT`)
	out := f.mustRun(t, exitOK, "dlq", "show", id).stdout
	for _, want := range []string{
		`Headers: not readable: outbox: invalid message: headers["x"]: value must be a string, is a number`,
		`as stored: {"x": 1}`, "Status             DEAD_LETTER",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, out)
		}
	}
	out = f.mustRun(t, exitOK, "dlq", "show", id, "--json").stdout
	var got detailOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dlq show --json: %v\n%s", err, out)
	}
	var raw map[string]any
	if err := json.Unmarshal(got.RawHeaders, &raw); err != nil || raw["x"] != 1.0 || !strings.Contains(got.Invalid, `headers["x"]`) ||
		len(got.Headers) != 0 {
		t.Errorf("dlq show --json: invalid %q, rawHeaders %s, headers %v; want the reason, the column as stored, no headers",
			got.Invalid, got.RawHeaders, got.Headers)
	}
	if out := f.mustRun(t, exitOK, "dlq", "list").stdout; !strings.Contains(out, id) {
		t.Errorf("dlq list lacks %s:\n%s", id, out)
	}
	f.mustRun(t, exitOK, "dlq", "discard", id, "--reason", "bad headers from the import script")
	if s := f.status(t, id); s != "DISCARDED" {
		t.Errorf("discarded message is %s, want DISCARDED", s)
	}
}

func TestDLQReplay_ByIDUnblocksAggregateAndRecordsAudit(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "dlq", "replay", seedDeadID, "--reason", "topic created", "--actor", "alice@ops").stdout
	if !strings.Contains(out, "replayed 1 message(s)") || !strings.Contains(out, seedDeadID) {
		t.Errorf("dlq replay output:\n%s", out)
	}
	if s := f.status(t, seedDeadID); s != "PENDING" {
		t.Errorf("replayed message is %s, want PENDING", s)
	}
	if n := f.queryInt(t, "SELECT attempts FROM {{schema}}.outbox_messages WHERE id = $1", seedDeadID); n != 0 {
		t.Errorf("replayed message has %d attempts, want 0", n)
	}
	if n := f.queryInt(t, `SELECT count(*) FROM {{schema}}.outbox_audit
		WHERE action = 'replay' AND actor = 'alice@ops' AND reason = 'topic created' AND message_ids = ARRAY[$1::uuid]`, seedDeadID); n != 1 {
		t.Errorf("%d matching audit entries, want 1", n)
	}
	// The aggregate is no longer blocked.
	out = f.mustRun(t, exitOK, "stats", "--json").stdout
	if !strings.Contains(out, `"blockedAggregates": 0`) {
		t.Errorf("stats after replay:\n%s", out)
	}

	// Replaying it again changes nothing and says why.
	res := f.run(t, "dlq", "replay", seedDeadID, seedDead2ID)
	if res.code != exitError || !strings.Contains(res.stderr, seedDeadID+" (PENDING)") {
		t.Errorf("replay of a pending message: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if s := f.status(t, seedDead2ID); s != "DEAD_LETTER" {
		t.Errorf("other dead letter is %s after a refused replay, want DEAD_LETTER", s)
	}
}

func TestDLQReplay_ByFilter(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "dlq", "replay", "--aggregate-type", "Invoice", "--reason", "limit raised").stdout
	if !strings.Contains(out, "replayed 1 message(s)") || !strings.Contains(out, seedDead2ID) {
		t.Errorf("dlq replay --aggregate-type Invoice:\n%s", out)
	}
	if f.status(t, seedDeadID) != "DEAD_LETTER" || f.status(t, seedDead2ID) != "PENDING" {
		t.Errorf("statuses after filtered replay: %s, %s", f.status(t, seedDeadID), f.status(t, seedDead2ID))
	}
	for _, args := range [][]string{{"dlq", "replay"}, {"dlq", "replay", seedDeadID, "--all"}} {
		if res := f.run(t, args...); res.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, res.code, exitUsage, res.stderr)
		}
	}
	out = f.mustRun(t, exitOK, "dlq", "replay", "--all").stdout
	if !strings.Contains(out, "replayed 1 message(s)") || f.status(t, seedDeadID) != "PENDING" {
		t.Errorf("dlq replay --all:\n%s", out)
	}
}

func TestDLQDiscard_RequiresReasonAndKeepsMessage(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	res := f.run(t, "dlq", "discard", seedDeadID)
	if res.code != exitUsage || !strings.Contains(res.stderr, "--reason is required") {
		t.Errorf("discard without reason: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	out := f.mustRun(t, exitOK, "dlq", "discard", seedDeadID, "--reason", "order deleted").stdout
	if !strings.Contains(out, "discarded 1 message(s)") {
		t.Errorf("dlq discard output:\n%s", out)
	}
	if s := f.status(t, seedDeadID); s != "DISCARDED" {
		t.Errorf("discarded message is %s, want DISCARDED", s)
	}
	out = f.mustRun(t, exitOK, "dlq", "show", seedDeadID).stdout
	if !strings.Contains(out, "discard by ") || !strings.Contains(out, ": order deleted") {
		t.Errorf("dlq show after discard lacks the audit entry:\n%s", out)
	}
}

func TestDLQReplay_AllIsNotTakenFromTheEnvironment(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	f.env["OUTBOX_ALL"] = "true"
	if res := f.run(t, "dlq", "replay"); res.code != exitUsage {
		t.Errorf("dlq replay with OUTBOX_ALL=true: exit %d, want %d; stdout:\n%s", res.code, exitUsage, res.stdout)
	}
	if s := f.status(t, seedDeadID); s != "DEAD_LETTER" {
		t.Errorf("dead letter is %s, want DEAD_LETTER", s)
	}
}
