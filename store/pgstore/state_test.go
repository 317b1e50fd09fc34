package pgstore_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// wantState is a message's state as outbox_message_states must report it.
type wantState struct {
	state    outbox.Status
	byCursor bool
}

// Every stored form of a message has one state in the view
// outbox_message_states (migration 016); Store.Get and Store.Counts report
// that state; and the function outbox_message_states, given states and
// cursor, returns exactly the view's messages in those states, whichever
// are asked for. An IN_FLIGHT message stays IN_FLIGHT once its lease
// expired. On a table partitioned after it had rows, the function reads
// the partitioned table, the old rows' partition included.
func TestMessageStates_OneDefinitionForEveryReader(t *testing.T) {
	t.Parallel()
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned=%v", partitioned), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			want := b.messagesInEveryState(t, partitioned)
			b.assertStates(t, want)
		})
	}
}

// messagesInEveryState writes a message in every stored form (the stored
// ones as the store leaves them, with SQL) and returns their states;
// partitioned partitions the table after the first one.
func (b *bundle) messagesInEveryState(t *testing.T, partitioned bool) map[uuid.UUID]wantState {
	t.Helper()
	ctx := pgstoretest.Context(t)
	want := map[uuid.UUID]wantState{}
	first := pgstoretest.Msg("Order", "legacy")
	b.Enqueue(t, first)
	want[first.ID] = wantState{outbox.StatusPending, false}
	if partitioned {
		st, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema, Partitioning: pgstore.Partitioning{Interval: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var pos *int64
	if err := b.Pool.QueryRow(ctx, b.SQL("SELECT {{schema}}.outbox_cursor_position()")).Scan(&pos); err != nil || pos != nil {
		t.Fatalf("outbox_cursor_position() before cursor mode = %v, %v; want NULL", pos, err)
	}
	for _, c := range []struct {
		set   string // the stored form, as a SET clause ("" for a fresh PENDING row)
		state outbox.Status
	}{
		{"", outbox.StatusPending},
		{"lease_owner = 'r', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds', next_attempt_at = now() + interval '30 seconds'", outbox.StatusInFlight},
		{"lease_owner = 'r', lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 minute', next_attempt_at = now() - interval '1 minute'", outbox.StatusInFlight},
		{"status = 'FAILED', attempts = 1, last_error = 'boom'", outbox.StatusFailed},
		{"status = 'FAILED', attempts = 1, lease_owner = 'r', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'", outbox.StatusInFlight},
		{"status = 'IN_FLIGHT', lease_owner = 'r', lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second'", outbox.StatusInFlight},
		{"status = 'SENT', published_at = now()", outbox.StatusSent},
		{"status = 'DEAD_LETTER', attempts = 5, last_error = 'boom'", outbox.StatusDeadLetter},
		{"status = 'DISCARDED', discarded_at = now()", outbox.StatusDiscarded},
	} {
		m := pgstoretest.Msg("Order", uuid.NewString())
		b.Enqueue(t, m)
		if c.set != "" {
			b.Exec(t, "UPDATE {{schema}}.outbox_messages SET "+c.set+" WHERE id = $1", m.ID)
		}
		want[m.ID] = wantState{c.state, false}
	}
	if err := b.Store.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	queued := []outbox.Message{pgstoretest.Msg("Order", "q1"), pgstoretest.Msg("Order", "q2"), pgstoretest.Msg("Order", "q3")}
	seqs := b.Enqueue(t, queued...)
	// The leader published the first two and saved its position.
	b.Exec(t, "UPDATE {{schema}}.outbox_cursor SET position = $1", seqs[1])
	want[queued[0].ID] = wantState{outbox.StatusSent, true}
	want[queued[1].ID] = wantState{outbox.StatusSent, true}
	want[queued[2].ID] = wantState{outbox.StatusPending, true}
	if err := b.Pool.QueryRow(ctx, b.SQL("SELECT {{schema}}.outbox_cursor_position()")).Scan(&pos); err != nil || pos == nil || *pos != seqs[1] {
		t.Fatalf("outbox_cursor_position() = %v, %v; want %d", pos, err, seqs[1])
	}
	return want
}

// assertStates checks the view, Store.Get, Store.Counts and the function
// with every set of states against want.
func (b *bundle) assertStates(t *testing.T, want map[uuid.UUID]wantState) {
	t.Helper()
	ctx := pgstoretest.Context(t)
	got := b.states(t, "SELECT id, state, by_cursor FROM {{schema}}.outbox_message_states")
	if !maps.Equal(got, want) {
		t.Errorf("outbox_message_states = %v, want %v", got, want)
	}
	counts := map[outbox.Status]int64{}
	for id, w := range want {
		counts[w.state]++
		if r := b.Get(t, id); r.Status != w.state {
			t.Errorf("Store.Get(%s).Status = %s, want %s", id, r.Status, w.state)
		}
	}
	stored, err := b.Store.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range stored {
		if n != counts[st] {
			t.Errorf("Store.Counts()[%s] = %d, want %d (all: %v)", st, n, counts[st], stored)
		}
	}
	all := []outbox.Status{outbox.StatusPending, outbox.StatusInFlight, outbox.StatusFailed,
		outbox.StatusSent, outbox.StatusDeadLetter, outbox.StatusDiscarded}
	for set := range 1 << len(all) {
		var states []string
		for i, st := range all {
			if set&(1<<i) != 0 {
				states = append(states, string(st))
			}
		}
		for _, cursor := range []*bool{nil, new(true), new(false)} {
			sel := map[uuid.UUID]wantState{}
			for id, w := range want {
				if slices.Contains(states, string(w.state)) && (cursor == nil || *cursor == w.byCursor) {
					sel[id] = w
				}
			}
			// The states as a literal, as callers write them, so that the
			// arms fold as they do for them.
			lit := "ARRAY[]::text[]"
			if len(states) > 0 {
				lit = "ARRAY['" + strings.Join(states, "', '") + "']"
			}
			curLit := "NULL"
			if cursor != nil {
				curLit = fmt.Sprint(*cursor)
			}
			got := b.states(t, "SELECT id, state, by_cursor FROM {{schema}}.outbox_message_states("+lit+", "+curLit+")")
			if !maps.Equal(got, sel) {
				t.Errorf("outbox_message_states(%v, %s) = %v, want %v", states, curLit, got, sel)
			}
		}
	}
}

// states reads id, state and by_cursor rows.
func (b *bundle) states(t *testing.T, sql string) map[uuid.UUID]wantState {
	t.Helper()
	rows, err := b.Pool.Query(pgstoretest.Context(t), b.SQL(sql))
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got := map[uuid.UUID]wantState{}
	var (
		id       uuid.UUID
		state    string
		byCursor bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &state, &byCursor}, func() error {
		got[id] = wantState{outbox.Status(state), byCursor}
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

// The cursor's state reads the cursor's row: none before cursor mode, and
// its position, mode and lease after.
func TestCursorState_ReadsTheCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	var n int
	if err := b.Pool.QueryRow(ctx, b.SQL("SELECT count(*) FROM {{schema}}.outbox_cursor_state()")).Scan(&n); err != nil || n != 0 {
		t.Fatalf("outbox_cursor_state() before cursor mode: %d rows, %v; want none", n, err)
	}
	if err := b.Store.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	b.Exec(t, `UPDATE {{schema}}.outbox_cursor SET position = 7, lease_owner = 'relay-a',
		lease_expires_at = now() + interval '30 seconds', handled_head = 9, unhandled_lo = '{8}', unhandled_hi = '{8}'`)
	var (
		active, leading bool
		position, head  int64
		owner           string
		ranges          int
	)
	err := b.Pool.QueryRow(ctx, b.SQL(`SELECT active, position, lease_owner, leading_now, handled_head, unhandled_ranges
		FROM {{schema}}.outbox_cursor_state()`)).Scan(&active, &position, &owner, &leading, &head, &ranges)
	if err != nil || !active || position != 7 || owner != "relay-a" || !leading || head != 9 || ranges != 1 {
		t.Errorf("outbox_cursor_state() = active %v, position %d, owner %q, leading %v, head %d, ranges %d, %v; "+
			"want active, 7, relay-a leading, handled up to 9 but for 1 range", active, position, owner, leading, head, ranges, err)
	}
}
