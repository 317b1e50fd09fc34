package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

const hostileID = "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f70"

// seedHostile writes, with plain SQL, a dead letter whose every stored
// text would act on a terminal: aggregate, event type, topic, headers,
// a text payload, last error, the attempts' errors and an audit entry; a
// message waits behind it, so its aggregate is blocked. A relay reported a
// topic with such a name, reason and fix.
// PostgreSQL text holds no invalid UTF-8, so that case is termSafe's test.
func (f *opsFixture) seedHostile(t *testing.T) {
	t.Helper()
	const evil = "\x1b[2J\r\a\u202e\u009b\x7f"
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, topic, payload, content_type, headers,
		 correlation_id, causation_id, status, attempts, last_error, created_at)
		VALUES ($1, $2, $3, $4, 1, $5, $6, 'text/plain', $7::jsonb, $8, $8, 'DEAD_LETTER', 1, $9, now() - interval '1 hour')`,
		hostileID, "Order"+evil, "42"+evil, "Placed"+evil, "t"+evil, []byte("pay\x1b[2Jload\r\nline two\a\u202e"),
		`{"x-evil": "v\u001b[2J\r\u202e", "k\u001b[31m": "v"}`, "corr"+evil, "error"+evil)
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status)
		VALUES (gen_random_uuid(), $1, $2, 'OrderPaid', 1, '{}', 'application/json', 'PENDING')`, "Order"+evil, "42"+evil)
	f.exec(t, `INSERT INTO {{schema}}.outbox_attempts (seq, message_id, attempt, error, dead)
		SELECT seq, id, 1, $2, true FROM {{schema}}.outbox_messages WHERE id = $1`, hostileID, "attempt"+evil)
	f.exec(t, `INSERT INTO {{schema}}.outbox_audit (actor, action, reason, message_ids)
		VALUES ($1, 'replay', $2, ARRAY[$3::uuid])`, "actor"+evil, "reason"+evil, hostileID)
	f.exec(t, `INSERT INTO {{schema}}.outbox_topics (relay_id, topic, published_last_hour, unavailable_since, reason, fix)
		VALUES ('r1', $1, 0, now() - interval '1 minute', $2, $3)`, "topic"+evil, "why"+evil, "fix"+evil)
	f.exec(t, "ANALYZE {{schema}}.outbox_messages")
}

// Every command that prints stored data prints it escaped: the dead
// letter's fields still read (ESC as \x1b), nothing acts on the terminal.
func TestStoredText_PrintsEscapedInEveryCommand(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seedHostile(t)
	f.mustRun(t, exitOK, "cursor", "enable")
	f.lead(t, "relay\x1b]0;owned\a\u202e")

	for _, c := range []struct {
		args []string
		want []string // escaped forms that must be shown
	}{
		{[]string{"dlq", "list"}, []string{`Order\x1b[2J\r\a\u202e\u009b\x7f/42\x1b[2J`, `Placed\x1b[2J`, `error\x1b[2J`}},
		{[]string{"dlq", "show", hostileID}, []string{
			`Order\x1b[2J\r\a\u202e\u009b\x7f/42\x1b[2J\r\a\u202e\u009b\x7f`, `Placed\x1b[2J`, `t\x1b[2J`, `corr\x1b[2J`,
			`error\x1b[2J\r\a\u202e`, `x-evil: v\x1b[2J\r\u202e`, `k\x1b[31m: v`,
			"pay\\x1b[2Jload\\r\n  line two\\a\\u202e", `attempt\x1b[2J`, `actor\x1b[2J`, `reason\x1b[2J`,
		}},
		{[]string{"dlq", "show", hostileID, "--json"}, []string{`\u001b[2J`, `\u202e`, `\u009b`, `\u007f`}},
		{[]string{"dlq", "list", "--json"}, []string{`\u001b[2J`, `\u202e`}},
		// The error class keeps the control characters that are not white
		// space, with numbers as N.
		{[]string{"dlq", "list", "--group"}, []string{`error\x1b[NJ`, `t\x1b[2J\r\a\u202e\u009b\x7f`, `Placed\x1b[2J\r\a\u202e\u009b\x7f`}},
		{[]string{"dlq", "list", "--group", "--json"}, []string{`\u001b[NJ`, `\u202e`}},
		{[]string{"stats"}, []string{`Order\x1b[2J\r\a\u202e\u009b\x7f/42\x1b[2J`, `Placed\x1b[2J`, `relay\x1b]0;owned\a\u202e`,
			`topic\x1b[2J\r\a\u202e\u009b\x7f`, `why\x1b[2J\r\a\u202e\u009b\x7f`, `fix\x1b[2J\r\a\u202e\u009b\x7f`}},
		{[]string{"stats", "--json"}, []string{`\u001b[2J`, `\u202e`}},
		{[]string{"cursor", "status"}, []string{`relay\x1b]0;owned\a\u202e`}},
	} {
		res := f.mustRun(t, exitOK, c.args...)
		what := "outbox " + strings.Join(c.args, " ")
		assertTerminalSafe(t, what, res.stdout)
		for _, want := range c.want {
			if !strings.Contains(res.stdout, want) {
				t.Errorf("%s does not show %q:\n%s", what, want, res.stdout)
			}
		}
		if strings.HasSuffix(c.args[len(c.args)-1], "--json") && !json.Valid([]byte(res.stdout)) {
			t.Errorf("%s printed invalid JSON:\n%s", what, res.stdout)
		}
	}
}

// The error line is escaped too: errors may quote what they were given.
func TestErrorLine_IsEscaped(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "stats", "--x\x1b[2J\u202e")
	if res.code != exitUsage {
		t.Fatalf("exit %d; want %d\n%s", res.code, exitUsage, res.stderr)
	}
	assertTerminalSafe(t, "the error line", res.stderr)
	if !strings.Contains(res.stderr, `--x\x1b[2J\u202e`) {
		t.Errorf("stderr does not name the flag, escaped:\n%s", res.stderr)
	}
}
