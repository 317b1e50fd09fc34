package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/inbox"
)

// The behaviour suite: each test runs against every inbox (eachInbox).

func TestHandle_FirstDeliveryIsProcessed_SecondIsDuplicate(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		m := msg()
		var runs int
		fn := func(ctx context.Context, m inbox.Message, tx effectWriter) error {
			runs++
			return tx.effect(m)
		}
		mustHandle(t, ib, "billing", m, fn, inbox.Processed)
		mustHandle(t, ib, "billing", m, fn, inbox.Duplicate)
		if runs != 1 {
			t.Errorf("handler ran %d times, want 1 (not at all for the duplicate)", runs)
		}
		wantEffects(t, ib, m.ID, 1)
		if !ib.marked(t, "billing", m.ID) {
			t.Error("message not recorded as processed")
		}
	})
}

func TestHandle_ConcurrentDuplicateDelivery_HasExactlyOneEffect(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		const deliveries = 6
		m := msg()
		var calls atomic.Int32
		fn := func(ctx context.Context, m inbox.Message, tx effectWriter) error {
			calls.Add(1)
			if err := tx.effect(m); err != nil {
				return err
			}
			// Hold the transaction open until the other deliveries wait
			// on our uncommitted record, so that they really overlap.
			return ib.overlap(ctx, deliveries-1)
		}
		results, errs := handleConcurrently(ctx, ib, "billing", m, fn, deliveries)
		for _, err := range errs {
			if err != nil {
				t.Errorf("Handle: %v", err)
			}
		}
		if got := countResults(results); got[inbox.Processed] != 1 || got[inbox.Duplicate] != deliveries-1 {
			t.Errorf("results %v, want 1 processed and %d duplicates", got, deliveries-1)
		}
		if calls.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", calls.Load())
		}
		wantEffects(t, ib, m.ID, 1)
	})
}

func TestHandle_ConcurrentDelivery_WhenTheFirstFails_AnotherAppliesIt(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		const deliveries = 5
		m := msg()
		boom := errors.New("boom")
		var calls atomic.Int32
		fn := func(ctx context.Context, m inbox.Message, tx effectWriter) error {
			call := calls.Add(1)
			if err := tx.effect(m); err != nil {
				return err
			}
			// The first holder fails once all others wait on it; the next
			// one gets through and waits for the remaining ones before it
			// commits.
			if err := ib.overlap(ctx, deliveries-int(call)); err != nil {
				return err
			}
			if call == 1 {
				return boom
			}
			return nil
		}
		results, errs := handleConcurrently(ctx, ib, "billing", m, fn, deliveries)
		var failed int
		for _, err := range errs {
			if errors.Is(err, boom) {
				failed++
			} else if err != nil {
				t.Errorf("Handle: %v", err)
			}
		}
		if got := countResults(results); failed != 1 || got[inbox.Processed] != 1 || got[inbox.Duplicate] != deliveries-2 {
			t.Errorf("results %v with %d failed, want 1 failed, 1 processed, %d duplicates", got, failed, deliveries-2)
		}
		wantEffects(t, ib, m.ID, 1)
	})
}

// handleConcurrently starts n Handle calls of the same message at once.
func handleConcurrently(ctx context.Context, ib target, consumer string, m inbox.Message, fn handler, n int) ([]inbox.Result, []error) {
	results, errs := make([]inbox.Result, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = ib.handle(ctx, consumer, m, fn)
		})
	}
	close(start)
	wg.Wait()
	return results, errs
}

func countResults(rs []inbox.Result) map[inbox.Result]int {
	out := map[inbox.Result]int{}
	for _, r := range rs {
		out[r]++
	}
	return out
}

func TestHandle_HandlerFailsAfterItsEffect_LeavesNeitherEffectNorMark(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		boom := errors.New("boom")
		_, err := ib.handle(ctx, "billing", m, func(ctx context.Context, m inbox.Message, tx effectWriter) error {
			if err := tx.effect(m); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Handle error = %v, want it to wrap the handler's error", err)
		}
		wantEffects(t, ib, m.ID, 0)
		if ib.marked(t, "billing", m.ID) {
			t.Error("failed message recorded as processed")
		}

		// Delivered again, it is applied once.
		mustHandle(t, ib, "billing", m, applyEffect, inbox.Processed)
		wantEffects(t, ib, m.ID, 1)
	})
}

func TestHandle_ConstraintViolationInTheHandler_IsAnErrorNotADuplicate(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		invoice := func(_ context.Context, m inbox.Message, tx effectWriter) error { return tx.invoice(m.AggregateID) }
		first, second := msg(), msg() // two events of one order
		mustHandle(t, ib, "billing", first, invoice, inbox.Processed)
		res, err := ib.handle(ctx, "billing", second, invoice)
		if res == inbox.Duplicate || err == nil {
			t.Fatalf("Handle = %v, %v; want the handler's primary key violation as an error, not a duplicate", res, err)
		}
		if ib.marked(t, "billing", second.ID) {
			t.Error("message whose handler failed recorded as processed")
		}
	})
}

func TestHandle_EachConsumerProcessesAMessageOnce(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		m := msg()
		for _, c := range []struct {
			consumer string
			want     inbox.Result
		}{{"billing", inbox.Processed}, {"inventory-service", inbox.Processed}, {"billing", inbox.Duplicate}} {
			mustHandle(t, ib, c.consumer, m, applyEffect, c.want)
		}
		wantEffects(t, ib, m.ID, 2)
	})
}

func TestHandle_PermanentErrorStaysVisible(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		_, err := ib.handle(testCtx(t), "billing", msg(), func(context.Context, inbox.Message, effectWriter) error {
			return fmt.Errorf("unknown event version 7: %w", inbox.ErrPermanent)
		})
		if !errors.Is(err, inbox.ErrPermanent) {
			t.Errorf("Handle error = %v, want it to wrap ErrPermanent", err)
		}
	})
}

func TestHandle_RejectsWhatItCannotDeduplicate(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		noID := msg()
		noID.ID = uuid.Nil
		if _, err := ib.handle(ctx, "billing", noID, applyEffect); !errors.Is(err, inbox.ErrMalformed) {
			t.Errorf("Handle(message without id) error = %v, want ErrMalformed", err)
		}
		if _, err := ib.handle(ctx, "", msg(), applyEffect); err == nil {
			t.Error("Handle with an empty consumer name succeeded")
		}
		if _, err := ib.handle(ctx, "billing", msg(), nil); err == nil {
			t.Error("Handle with a nil handler succeeded")
		}
		if n := ib.processed(t); n != 0 {
			t.Errorf("%d messages recorded, want 0", n)
		}
	})
}

// parkAndFind parks m for consumer and returns its entry.
func parkAndFind(t *testing.T, ib target, consumer string, m inbox.Message, attempts int, cause error) inbox.Parked {
	t.Helper()
	ctx := testCtx(t)
	if err := ib.Park(ctx, consumer, m, attempts, cause); err != nil {
		t.Fatalf("Park: %v", err)
	}
	ps, err := ib.Parked(ctx, inbox.ParkedFilter{Consumer: consumer, IncludeReplayed: true, Limit: 1000})
	if err != nil {
		t.Fatalf("Parked: %v", err)
	}
	for _, p := range ps {
		if p.Message.ID == m.ID && p.Message.Offset == m.Offset {
			return p
		}
	}
	t.Fatalf("parked message %s not listed", m.ID)
	return inbox.Parked{}
}

func TestPark_KeepsPayloadHeadersPositionAndError(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		m := msg()
		m.Headers["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		m.Headers["odd"] = "nul\x00 and \xff"
		m.TraceParent = m.Headers["traceparent"]
		m.Payload = []byte{0, 1, 2, 0xff} // stored byte for byte
		m.Timestamp = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
		cause := errors.New("stock service said no\x00: " + strings.Repeat("é", 3000))

		p := parkAndFind(t, ib, "billing", m, 5, cause)

		if p.ID == uuid.Nil || p.Consumer != "billing" || p.Attempts != 5 || p.ParkedAt.IsZero() || !p.ReplayedAt.IsZero() {
			t.Errorf("entry %+v", p)
		}
		if since := time.Since(p.ParkedAt); since < -time.Minute || since > time.Minute {
			t.Errorf("ParkedAt %v is not about now", p.ParkedAt)
		}
		if len(p.Error) != 4000 || !strings.HasPrefix(p.Error, "stock service said no\uFFFD: éé") {
			t.Errorf("error kept as %d bytes starting %.30q, want 4000 bytes without NUL", len(p.Error), p.Error)
		}
		got := p.Message
		if got.ID != m.ID || got.EventType != m.EventType || got.EventVersion != 1 || got.AggregateType != "Order" ||
			got.AggregateID != m.AggregateID || got.TraceParent != m.TraceParent ||
			got.Topic != m.Topic || got.Partition != m.Partition || got.Offset != m.Offset || !got.Timestamp.Equal(m.Timestamp) {
			t.Errorf("parked message %+v, want %+v", got, m)
		}
		if string(got.Payload) != string(m.Payload) {
			t.Errorf("payload %v, want %v", got.Payload, m.Payload)
		}
		want := maps.Clone(m.Headers)
		want["odd"] = "nul\uFFFD and \uFFFD"
		if !maps.Equal(got.Headers, want) {
			t.Errorf("headers %v, want %v", got.Headers, want)
		}
	})
}

func TestPark_SameRecordTwice_KeepsOneEntry(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		first := parkAndFind(t, ib, "billing", m, 5, errors.New("first"))
		if err := ib.Park(ctx, "billing", m, 5, errors.New("again after a crash")); err != nil {
			t.Fatalf("second Park: %v", err)
		}
		ps, err := ib.Parked(ctx, inbox.ParkedFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || ps[0].ID != first.ID || ps[0].Error != "first" {
			t.Errorf("Parked = %+v, want only the first entry", ps)
		}
		// The same message at another offset (the relay sent it twice) is
		// a separate entry.
		m.Offset++
		parkAndFind(t, ib, "billing", m, 5, errors.New("the copy"))
	})
}

func TestPark_MalformedRecordWithoutID(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		m := msg()
		m.ID = uuid.Nil
		m.Headers["eventId"] = "not-a-uuid"
		p := parkAndFind(t, ib, "billing", m, 0, inbox.ErrMalformed)
		if p.Message.ID != uuid.Nil || p.Message.Headers["eventId"] != "not-a-uuid" || p.Attempts != 0 {
			t.Errorf("parked %+v", p)
		}
		_, err := ib.replay(testCtx(t), "billing", p.ID, applyEffect)
		if !errors.Is(err, inbox.ErrMalformed) {
			t.Errorf("Replay of a message without id: %v, want ErrMalformed", err)
		}
	})
}

func TestParked_FiltersByConsumerEventTypeAndLimit(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		placed, shipped, other := msg(), msg(), msg()
		shipped.EventType = "OrderShipped"
		parkAndFind(t, ib, "billing", placed, 1, errors.New("a"))
		parkAndFind(t, ib, "billing", shipped, 1, errors.New("b"))
		parkAndFind(t, ib, "inventory-service", other, 1, errors.New("c"))

		for _, c := range []struct {
			name string
			f    inbox.ParkedFilter
			want []uuid.UUID
		}{
			{"all", inbox.ParkedFilter{}, []uuid.UUID{placed.ID, shipped.ID, other.ID}},
			{"consumer", inbox.ParkedFilter{Consumer: "billing"}, []uuid.UUID{placed.ID, shipped.ID}},
			{"event type", inbox.ParkedFilter{EventType: "OrderShipped"}, []uuid.UUID{shipped.ID}},
			{"both", inbox.ParkedFilter{Consumer: "inventory-service", EventType: "OrderShipped"}, nil},
			{"limit", inbox.ParkedFilter{Limit: 2}, []uuid.UUID{placed.ID, shipped.ID}},
		} {
			ps, err := ib.Parked(ctx, c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var got []uuid.UUID
			for _, p := range ps {
				got = append(got, p.Message.ID)
			}
			if !equalIDs(got, c.want) {
				t.Errorf("%s: Parked(%+v) = %v, want %v", c.name, c.f, got, c.want)
			}
		}
		if _, err := ib.Parked(ctx, inbox.ParkedFilter{Limit: -1}); err == nil {
			t.Error("Parked with a negative limit succeeded")
		}
	})
}

func equalIDs(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReplay_AppliesOnce_ThenSaysDuplicate(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		p := parkAndFind(t, ib, "billing", m, 5, errors.New("bug in the handler"))

		var seen inbox.Message
		fixed := func(ctx context.Context, got inbox.Message, tx effectWriter) error {
			seen = got
			return tx.effect(got)
		}
		mustReplay(t, ib, "billing", p.ID, fixed, inbox.Processed)
		if seen.ID != m.ID || string(seen.Payload) != string(m.Payload) || seen.EventType != m.EventType {
			t.Errorf("handler saw %+v, want the parked message", seen)
		}
		mustReplay(t, ib, "billing", p.ID, fixed, inbox.Duplicate)
		wantEffects(t, ib, m.ID, 1)
		if open, err := ib.Parked(ctx, inbox.ParkedFilter{Consumer: "billing"}); err != nil || len(open) != 0 {
			t.Errorf("Parked after the replay = %v, %v; want none waiting", open, err)
		}
		all := parkAndFind(t, ib, "billing", m, 5, nil) // listed with IncludeReplayed: kept for audit
		if all.ID != p.ID || all.ReplayedAt.IsZero() {
			t.Errorf("replayed entry %+v, want it kept with ReplayedAt", all)
		}
	})
}

func TestReplay_FailingHandler_LeavesTheEntryParked(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		p := parkAndFind(t, ib, "billing", m, 5, errors.New("bug"))
		boom := errors.New("still broken")
		_, err := ib.replay(ctx, "billing", p.ID, func(ctx context.Context, m inbox.Message, tx effectWriter) error {
			if err := tx.effect(m); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Replay error = %v, want the handler's", err)
		}
		if n := ib.effects(t, m.ID); n != 0 || ib.marked(t, "billing", m.ID) {
			t.Errorf("after a failed replay: %d effects, marked %v; want neither", n, ib.marked(t, "billing", m.ID))
		}
		if open, err := ib.Parked(ctx, inbox.ParkedFilter{}); err != nil || len(open) != 1 || !open[0].ReplayedAt.IsZero() {
			t.Errorf("Parked = %+v, %v; want the entry still waiting", open, err)
		}
	})
}

func TestReplay_MessageAppliedMeanwhile_IsDuplicateAndResolved(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		p := parkAndFind(t, ib, "billing", m, 5, errors.New("timeout"))
		// Another delivery of the same event got through in the meantime.
		mustHandle(t, ib, "billing", m, applyEffect, inbox.Processed)
		mustReplay(t, ib, "billing", p.ID, applyEffect, inbox.Duplicate)
		wantEffects(t, ib, m.ID, 1)
		if open, _ := ib.Parked(ctx, inbox.ParkedFilter{}); len(open) != 0 {
			t.Errorf("entry still waiting after a duplicate replay: %+v", open)
		}
	})
}

func TestReplay_UnknownEntryOrOtherConsumer_IsNotFound(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		p := parkAndFind(t, ib, "billing", msg(), 1, errors.New("x"))
		if _, err := ib.replay(ctx, "billing", uuid.New(), applyEffect); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("Replay(unknown id) error = %v, want ErrNotFound", err)
		}
		if _, err := ib.replay(ctx, "inventory-service", p.ID, applyEffect); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("Replay by another consumer error = %v, want ErrNotFound", err)
		}
	})
}

func TestCleanup_DeletesOnlyIdsOlderThanRetention_InBatches(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{retention: 24 * time.Hour, batch: 2})
		ctx := testCtx(t)
		handled := func(n int) []uuid.UUID {
			var ids []uuid.UUID
			for range n {
				m := msg()
				if _, err := ib.handle(ctx, "billing", m, applyEffect); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, m.ID)
			}
			return ids
		}
		old, recent := handled(5), handled(2)
		ib.backdate(t, 25*time.Hour, old...)
		ib.backdate(t, 23*time.Hour, recent[0])

		n, err := ib.Cleanup(ctx)
		if err != nil || n != 5 {
			t.Fatalf("Cleanup = %d, %v; want 5 deleted in batches of 2", n, err)
		}
		for _, id := range old {
			if ib.marked(t, "billing", id) {
				t.Errorf("id %s older than the retention was kept", id)
			}
		}
		for _, id := range recent {
			if !ib.marked(t, "billing", id) {
				t.Errorf("id %s within the retention was deleted", id)
			}
		}
		if n, err := ib.Cleanup(ctx); err != nil || n != 0 {
			t.Errorf("second Cleanup = %d, %v; want 0", n, err)
		}
	})
}

// The documented price of a too short retention: a message delivered again
// after its id was deleted is applied again.
func TestCleanup_RedeliveryAfterRetention_IsAppliedAgain(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		m := msg()
		if _, err := ib.handle(ctx, "billing", m, applyEffect); err != nil {
			t.Fatal(err)
		}
		ib.backdate(t, 31*24*time.Hour, m.ID)
		if n, err := ib.Cleanup(ctx); err != nil || n != 1 {
			t.Fatalf("Cleanup = %d, %v; want 1 (default retention 30 days)", n, err)
		}
		mustHandle(t, ib, "billing", m, applyEffect, inbox.Processed)
		wantEffects(t, ib, m.ID, 2)
	})
}

// Replayed parked messages are deleted once replayed longer than
// ReplayedRetention ago, each statement deleting at most CleanupBatchSize;
// younger replays are kept, and so is a message parked long ago and never
// replayed (ParkedRetention is off by default).
func TestCleanup_ReplayedParkedMessages_DeletedAfterReplayedRetention_InBatches(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{replayed: 24 * time.Hour, batch: 2})
		ctx := testCtx(t)
		var replayed []uuid.UUID
		for range 7 {
			p := parkAndFind(t, ib, "billing", msg(), 5, errors.New("x"))
			mustReplay(t, ib, "billing", p.ID, applyEffect, inbox.Processed)
			replayed = append(replayed, p.ID)
		}
		old, young := replayed[:5], replayed[5:]
		ib.backdateParked(t, "replayed_at", 25*time.Hour, old...)
		ib.backdateParked(t, "replayed_at", 23*time.Hour, young[0])
		waiting := parkAndFind(t, ib, "billing", msg(), 5, errors.New("x")).ID
		ib.backdateParked(t, "parked_at", 1000*24*time.Hour, waiting)

		if n, err := ib.CleanupBatch(ctx, "replayed parked messages"); err != nil || n != 2 {
			t.Fatalf("one cleanup statement deleted %d, %v; want 2 (CleanupBatchSize)", n, err)
		}
		if n, err := ib.Cleanup(ctx); err != nil || n != 3 {
			t.Fatalf("Cleanup = %d, %v; want the 3 other old replays deleted", n, err)
		}
		wantParked(t, ib, append([]uuid.UUID{waiting}, young...))
	})
}

// With ParkedRetention set, parked messages never replayed are deleted once
// parked longer than it ago, each statement deleting at most
// CleanupBatchSize; younger ones are kept, and so is an old entry that was
// replayed (ReplayedRetention governs it).
func TestCleanup_ParkedRetention_DeletesOnlyOldUnreplayed_InBatches(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{parked: 7 * 24 * time.Hour, batch: 2})
		ctx := testCtx(t)
		var parked []uuid.UUID
		for range 7 {
			parked = append(parked, parkAndFind(t, ib, "billing", msg(), 5, errors.New("x")).ID)
		}
		old, young := parked[:5], parked[5:]
		ib.backdateParked(t, "parked_at", 8*24*time.Hour, old...)
		ib.backdateParked(t, "parked_at", 6*24*time.Hour, young[0])
		done := parkAndFind(t, ib, "billing", msg(), 5, errors.New("x")).ID
		mustReplay(t, ib, "billing", done, applyEffect, inbox.Processed)
		ib.backdateParked(t, "parked_at", 8*24*time.Hour, done)

		if n, err := ib.CleanupBatch(ctx, "parked messages never replayed"); err != nil || n != 2 {
			t.Fatalf("one cleanup statement deleted %d, %v; want 2 (CleanupBatchSize)", n, err)
		}
		if n, err := ib.Cleanup(ctx); err != nil || n != 3 {
			t.Fatalf("Cleanup = %d, %v; want the 3 other old entries deleted", n, err)
		}
		wantParked(t, ib, append([]uuid.UUID{done}, young...))
	})
}

// wantParked fails the test unless the parked entries, replayed or not, are
// exactly ids.
func wantParked(t *testing.T, ib target, ids []uuid.UUID) {
	t.Helper()
	ps, err := ib.Parked(testCtx(t), inbox.ParkedFilter{IncludeReplayed: true, Limit: 1000})
	if err != nil {
		t.Fatalf("Parked: %v", err)
	}
	want := map[uuid.UUID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, p := range ps {
		if !want[p.ID] {
			t.Errorf("parked entry %s (parked %s, replayed %s) was kept, want it deleted", p.ID, p.ParkedAt, p.ReplayedAt)
		}
		delete(want, p.ID)
	}
	for id := range want {
		t.Errorf("parked entry %s was deleted, want it kept", id)
	}
}

func TestBind_AppliesParksAndPingsThroughTheInbox(t *testing.T) {
	eachInbox(t, func(t *testing.T, setup setupFunc) {
		ib := setup(t, targetConfig{})
		ctx := testCtx(t)
		bound := ib.bind(applyEffect)
		m := msg()
		if res, err := bound.Apply(ctx, "billing", m); err != nil || res != inbox.Processed {
			t.Fatalf("Apply = %v, %v; want processed", res, err)
		}
		if res, err := bound.Apply(ctx, "billing", m); err != nil || res != inbox.Duplicate {
			t.Fatalf("second Apply = %v, %v; want duplicate", res, err)
		}
		wantEffects(t, ib, m.ID, 1)
		if err := bound.Park(ctx, "billing", msg(), 3, errors.New("x")); err != nil {
			t.Fatalf("Park: %v", err)
		}
		if ps, err := ib.Parked(ctx, inbox.ParkedFilter{}); err != nil || len(ps) != 1 || ps[0].Attempts != 3 {
			t.Errorf("Parked = %+v, %v; want the entry parked through Bound", ps, err)
		}
		if err := bound.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
		if _, err := ib.bind(nil).Apply(ctx, "billing", msg()); err == nil {
			t.Error("Apply with a nil bound handler succeeded")
		}
	})
}
