package cli

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
)

// queue inserts n messages created age ago; in cursor mode they are QUEUED
// (the column's default).
func (f *opsFixture) queue(t *testing.T, n int, age time.Duration) {
	t.Helper()
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, created_at)
		SELECT gen_random_uuid(), 'Order', g::text, 'OrderPlaced', 1, '{}', 'application/json', now() - $2::bigint * interval '1 millisecond'
		FROM generate_series(1, $1::int) g`, n, age.Milliseconds())
}

// passCursor moves the cursor's saved position over the n lowest QUEUED
// messages, as the leading relay does once it published them.
func (f *opsFixture) passCursor(t *testing.T, n int) {
	t.Helper()
	f.exec(t, `UPDATE {{schema}}.outbox_cursor SET saved_at = now(), position =
		(SELECT max(seq) FROM (SELECT seq FROM {{schema}}.outbox_messages WHERE status = 'QUEUED' ORDER BY seq LIMIT $1) s)`, n)
}

// lead gives the cursor's lease to owner for a minute, as a relay that
// leads it holds it.
func (f *opsFixture) lead(t *testing.T, owner string) {
	t.Helper()
	f.exec(t, `UPDATE {{schema}}.outbox_cursor
		SET lease_owner = $1, lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'`, owner)
}

func TestCursorEnable_TurnsCursorModeOnAndSaysSo(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	out := f.mustRun(t, exitOK, "cursor", "enable").stdout
	if !strings.Contains(out, "cursor mode is on in schema "+f.schema) || !strings.Contains(out, "starts at position 0") {
		t.Errorf("cursor enable output:\n%s", out)
	}
	f.queue(t, 1, 0)
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'QUEUED'"); n != 1 {
		t.Errorf("%d QUEUED messages after enable, want the new one", n)
	}
	out = f.mustRun(t, exitOK, "cursor", "enable").stdout
	if !strings.Contains(out, "cursor mode was already on") {
		t.Errorf("second cursor enable output:\n%s", out)
	}
}

// A refusal of pgstore (here: a seq sequence that caches values) is an
// error with exit status 1, and nothing changes.
func TestCursorEnable_RefusalExitsWithTheError(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.exec(t, "ALTER SEQUENCE {{schema}}.outbox_messages_seq_seq CACHE 10")
	res := f.mustRun(t, exitError, "cursor", "enable")
	if !strings.Contains(res.stderr, "pgstore: enable cursor mode") || !strings.Contains(res.stderr, "CACHE 1") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
	if out := f.mustRun(t, exitOK, "cursor", "status").stdout; !strings.Contains(out, "Mode:               claim") {
		t.Errorf("cursor status after the refusal:\n%s", out)
	}
}

// Before 'outbox migrate' the switch fails with exit status 1 and the error.
func TestCursorEnable_BeforeMigrateFails(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.Schema(t)
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema, "OUTBOX_LOG_LEVEL": "warn"}
	res := runCLI(t, env, "cursor", "enable")
	if res.code != exitError || !strings.Contains(res.stderr, "pgstore: enable cursor mode") || res.stdout != "" {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}

func TestCursorStatus_PrintsPositionLeaderAndLag(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.queue(t, 5, time.Hour)
	f.passCursor(t, 2)
	f.lead(t, "relay-9")
	position := f.queryInt(t, "SELECT position FROM {{schema}}.outbox_cursor")
	// The leader's last save: of the 3 messages above the position, the
	// first is still in a range it had not handled, the other 2 were.
	f.exec(t, `UPDATE {{schema}}.outbox_cursor SET handled_head = position + 3,
		unhandled_lo = ARRAY[position + 1], unhandled_hi = ARRAY[position + 1]`)

	out := f.mustRun(t, exitOK, "cursor", "status").stdout
	for _, want := range []string{
		"Mode:               cursor",
		"Cursor position:    " + strconv.Itoa(position) + " (saved ",
		"Cursor leader:      relay-9 (lease until ",
		"Handled above it:   up to seq " + strconv.Itoa(position+3) + ", but for 1 range(s)",
		"Cursor lag:         3 message(s), the oldest 1h0m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cursor status lacks %q:\n%s", want, out)
		}
	}

	out = f.mustRun(t, exitOK, "cursor", "status", "--json").stdout
	var got cursorJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("cursor status --json: %v\n%s", err, out)
	}
	if got.Mode != ops.ModeCursor || !got.Present || got.Position != int64(position) || got.Leader != "relay-9" || !got.Leading ||
		got.LeaseExpiresAt == nil || got.SavedAt == nil || got.LagMessages != 3 || got.LagSeconds < 3600 ||
		got.HandledHead != int64(position+3) || got.UnhandledRanges != 1 {
		t.Errorf("cursor status --json = %+v", got)
	}
}

func TestCursorStatus_ClaimModeHasNoCursor(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	out := f.mustRun(t, exitOK, "cursor", "status").stdout
	if !strings.Contains(out, "Mode:               claim") || strings.Contains(out, "Cursor position") {
		t.Errorf("cursor status in claim mode:\n%s", out)
	}
}

func TestCursorDisable_MovesUnsentMessagesBackAndSaysHowMany(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.queue(t, 5, 0)
	f.passCursor(t, 2)
	out := f.mustRun(t, exitOK, "cursor", "disable").stdout
	if !strings.Contains(out, "cursor mode is off in schema "+f.schema+": 3 unsent QUEUED message(s) moved to PENDING") ||
		!strings.Contains(out, "QUEUED messages at or below it count as SENT") {
		t.Errorf("cursor disable output:\n%s", out)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'PENDING'"); n != 3 {
		t.Errorf("%d PENDING messages after disable, want 3", n)
	}
	if out := f.mustRun(t, exitOK, "cursor", "disable").stdout; !strings.Contains(out, "cursor mode was already off") {
		t.Errorf("second cursor disable output:\n%s", out)
	}
}

// Disabling while a relay leads the cursor is refused with exit status 1,
// naming the relay, and changes nothing.
func TestCursorDisable_RefusedWhileARelayLeads(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.queue(t, 2, 0)
	f.lead(t, "relay-3")
	res := f.mustRun(t, exitError, "cursor", "disable")
	if !strings.Contains(res.stderr, "pgstore: disable cursor mode") || !strings.Contains(res.stderr, `relay "relay-3" leads the cursor`) ||
		!strings.Contains(res.stderr, "stop the relays first") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
	if res.stdout != "" {
		t.Errorf("a refused disable printed:\n%s", res.stdout)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'QUEUED'"); n != 2 {
		t.Errorf("%d QUEUED messages after the refused disable, want 2", n)
	}
}

// outbox stats in cursor mode counts the unsent QUEUED messages as PENDING
// and the passed ones as SENT, and shows the cursor.
func TestStats_CursorModeShowsTheCursorAndCountsQueuedMessages(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.queue(t, 3, time.Hour)
	f.passCursor(t, 1)
	out := f.mustRun(t, exitOK, "stats", "--exact").stdout
	for _, want := range []string{"PENDING      2", "SENT         1\n", "Oldest unsent:      1h0m", "Mode:               cursor",
		"Cursor lag:         2 message(s)", "the cursor's messages are not counted"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}
	var got statsOutput
	out = f.mustRun(t, exitOK, "stats", "--json", "--exact").stdout
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	if got.Mode != ops.ModeCursor || got.Cursor.LagMessages != 2 || got.Counts["PENDING"] != 2 || got.Counts["SENT"] != 1 ||
		got.CursorSent != 1 || got.CursorSentLastMinute != -1 {
		t.Errorf("stats --json = %+v", got)
	}
}

// outbox cleanup deletes the old QUEUED messages the cursor passed, and
// says so.
func TestCleanup_CursorModeDeletesOldPassedQueuedMessages(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.queue(t, 3, 10*24*time.Hour)
	f.passCursor(t, 2)
	out := f.mustRun(t, exitOK, "cleanup", "--older-than", "7d").stdout
	if !strings.Contains(out, "deleted 2 SENT message(s)") || !strings.Contains(out, "2 of the SENT message(s) were QUEUED") {
		t.Errorf("cleanup output:\n%s", out)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages"); n != 1 {
		t.Errorf("%d messages left, want the unsent one", n)
	}
}

// The relay's gauges get the cursor from the stats.
func TestMetricsSnapshot_CarriesTheCursor(t *testing.T) {
	t.Parallel()
	at := time.Now()
	s := ops.Stats{Cursor: ops.CursorState{At: at, Mode: ops.ModeCursor, Present: true, Position: 77, Leading: true,
		SavedAt: at.Add(-300 * time.Millisecond), LagMessages: 4, LagAge: 2 * time.Second}}
	c := metricsSnapshot(s).Cursor
	if !c.Active || c.Position != 77 || !c.Leading || c.SavedAge != 300*time.Millisecond || c.LagMessages != 4 || c.LagAge != 2*time.Second {
		t.Errorf("metricsSnapshot(...).Cursor = %+v", c)
	}
	if c := metricsSnapshot(ops.Stats{}).Cursor; c.Active || c.SavedAge != 0 {
		t.Errorf("claim mode: Cursor = %+v, want zero", c)
	}
}
