package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Names of the invariants [Check] decides. A failed report lists the
// violated ones in Report.Violations.
const (
	InvNoLost        = "no-lost-event"            // every committed event reached the topic
	InvNoPhantom     = "no-phantom-event"         // nothing on the topic or in the tables for a rolled-back or rejected write
	InvOrder         = "per-aggregate-order"      // first deliveries of an aggregate's events in enqueue order
	InvDuplicates    = "duplicates-bounded"       // copies only inside fault windows, at most MaxCopies each
	InvEffects       = "exactly-one-effect"       // one business effect per event, stock conserved
	InvDeadLetters   = "dead-letters-only-poison" // DEAD_LETTER exactly for the injected poison
	InvDrain         = "drain-within-bound"       // the backlog drained within DrainBound after the heal
	InvResourcesFlat = "relay-resources-flat"     // no relay's memory, goroutines or connections grew (the flat rule)
	InvNoUnknownFail = "harness-observed-all"     // the harness could read everything it needed
)

// Request outcomes, as the client saw them.
const (
	OutcomeOK            = "ok"            // the write committed (2xx, or COMMIT returned no error)
	OutcomeRejected      = "rejected"      // refused (4xx) or rolled back on purpose: no event may exist
	OutcomeIndeterminate = "indeterminate" // no answer (connection error, timeout, 5xx): either is allowed
)

// Observations is everything the checker looks at. It is plain data, so a
// test can fabricate one.
type Observations struct {
	// Started is when the load started; Healed is when every fault was
	// healed and the load had stopped; Drained is when the backlog was
	// drained (zero if it never was).
	Started, Healed, Drained time.Time
	// Faults are the windows in which faults were active.
	Faults []FaultWindow
	// Requests are the client's writes with their outcome.
	Requests []Request
	// Outbox is every row of the outbox table after the drain.
	Outbox []OutboxRow
	// Records is every record read from the topics, in (topic, partition,
	// offset) order.
	Records []TopicRecord
	// Poison are the ids of the messages injected to become dead letters.
	Poison []string
	// Effects are the consumers' tables.
	Effects Effects
	// Resources are the relays' samples, judged by the flat rule.
	Resources []ResourceSeries
	// ReadErrors are what the harness failed to read; any makes the run FAIL.
	ReadErrors []string
}

// FaultWindow is a fault's active time.
type FaultWindow struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
}

// Request is one write of the workload.
type Request struct {
	// Kind is place, pay, ship, cancel, invalid, oversized, probe, late or poison.
	Kind    string
	Outcome string
	// AggregateID is the order id (or probe aggregate) written, if known.
	AggregateID string
	// Version is the order's version after a successful HTTP write.
	Version int64
	// EventID is the event's id for the harness's own enqueues.
	EventID string
	// Marker is a string that only this request's data contains (the
	// customer id of a rejected order).
	Marker string
}

// OutboxRow is a row of the outbox table.
type OutboxRow struct {
	ID, AggregateType, AggregateID, EventType, Topic, Status string
	Seq                                                      int64
	CreatedAt                                                time.Time
	// Markers are the request markers found in its payload.
	Markers []string
}

// TopicRecord is one record read from a topic.
type TopicRecord struct {
	Topic                                          string
	Partition                                      int32
	Offset                                         int64
	EventID, AggregateType, AggregateID, EventType string
	// Version is the payload's "version" field (the order's version), 0 if none.
	Version   int64
	Timestamp time.Time
}

// Effects are the business effects the consumers left.
type Effects struct {
	// Consumers are the consumer names expected to process every event of
	// OrdersTopic, as recorded in the inbox.
	Consumers   []string
	OrdersTopic string
	// Processed counts inbox rows by consumer and event id.
	Processed map[string]map[string]int
	// Orders are the order service's orders.
	Orders []Order
	// Invoices and Reservations count rows by order id; InvoiceStatus,
	// ReservationStatus hold each one's status, CreditNotes count notes.
	Invoices, Reservations, CreditNotes map[string]int
	InvoiceStatus, ReservationStatus    map[string]string
	// Stock, InitialStock, ReservedUnits and ShippedUnits are per SKU:
	// ReservedUnits sums the items of RESERVED reservations, ShippedUnits
	// those of SHIPPED ones.
	Stock                       map[string][2]int64 // available, reserved
	InitialStock                map[string]int64
	ReservedUnits, ShippedUnits map[string]int64
	// MarkerRows counts rows of the order service that carry a rejected
	// request's marker.
	MarkerRows int
}

// Order is a row of the order service.
type Order struct {
	ID, Status string
	Version    int64
}

// Bounds are the limits the checker holds the run to.
type Bounds struct {
	// MaxCopies is the most copies of one event allowed on a topic.
	MaxCopies int
	// OutageMaxCopies is the bound instead for an event whose extra copies
	// were all produced during a broker outage (broker-stop, or a fault on
	// the broker's link). Each relay that claims the event while the broker
	// is unreachable hands its producer a copy that the idempotent producer
	// cannot take back, so the copies grow with the relays that took turns
	// (docs/chaos.md, "What it found"). Zero means MaxCopies.
	OutageMaxCopies int
	// Beyond MaxCopies, an event may also have one extra copy per relay
	// killed or paused (relay-kill, -kill-after-ack, -kill-in-mark,
	// relay-zombie): a relay that dies after the broker acknowledged a
	// record and before it recorded that leaves the record to be published
	// again, however often that happens. Every extra copy must then be
	// matched to a kill of its own whose window (with Grace) holds it. In
	// cursor mode the failpoint kills aim at the leader, and each new
	// leader first publishes what its predecessor left unrecorded, so
	// consecutive kills after an acknowledgement hit the same records.
	// Grace extends every fault window: a duplicate caused by a fault may
	// appear up to this long after it ended (a lease has to expire first).
	Grace time.Duration
	// DrainBound is the longest allowed drain after the heal.
	DrainBound time.Duration
}

// Check decides every invariant over obs and returns the report's
// figures and verdict. It is a pure function of its arguments.
func Check(obs Observations, b Bounds) Verdict {
	v := Verdict{Violations: map[string][]string{}}
	violate := func(inv, format string, args ...any) {
		if len(v.Violations[inv]) < 20 { // examples, not an exhaustive list
			v.Violations[inv] = append(v.Violations[inv], fmt.Sprintf(format, args...))
		}
		v.counts[inv]++
	}
	v.counts = map[string]int{}
	for _, e := range obs.ReadErrors {
		violate(InvNoUnknownFail, "%s", e)
	}

	poison := map[string]bool{}
	for _, id := range obs.Poison {
		poison[id] = true
	}
	byID := map[string]OutboxRow{}
	for _, r := range obs.Outbox {
		byID[r.ID] = r
		if r.Status == "DEAD_LETTER" {
			v.DeadLetters.Actual++
		}
	}
	v.DeadLetters.Expected = len(obs.Poison)

	// Copies on the topics, in order.
	copies := map[string][]TopicRecord{}
	type aggKey struct{ topic, typ, id string }
	stream := map[aggKey][]TopicRecord{}
	var aggOrder []aggKey
	records := slices.Clone(obs.Records)
	sort.SliceStable(records, func(i, j int) bool {
		a, b := records[i], records[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	for _, r := range records {
		copies[r.EventID] = append(copies[r.EventID], r)
		k := aggKey{r.Topic, r.AggregateType, r.AggregateID}
		if _, ok := stream[k]; !ok {
			aggOrder = append(aggOrder, k)
		}
		stream[k] = append(stream[k], r)
	}
	v.Events.Delivered = len(copies)

	// No lost event: every committed message is on its topic.
	committedRows := 0
	for _, r := range obs.Outbox {
		if poison[r.ID] {
			continue
		}
		committedRows++
		if len(copies[r.ID]) == 0 {
			v.Events.Lost++
			violate(InvNoLost, "outbox message %s (%s %s/%s, status %s) never reached topic %s", r.ID, r.EventType, r.AggregateType, r.AggregateID, r.Status, r.Topic)
		}
	}
	v.Events.Committed = committedRows
	versions := map[string]map[int64]bool{} // order id -> versions delivered on the orders topic
	for _, r := range records {
		if r.Topic == obs.Effects.OrdersTopic && r.Version > 0 {
			if versions[r.AggregateID] == nil {
				versions[r.AggregateID] = map[int64]bool{}
			}
			versions[r.AggregateID][r.Version] = true
		}
	}
	rolledBack, acked := map[string]bool{}, map[string]bool{}
	for _, q := range obs.Requests {
		v.Requests.count(q.Outcome)
		switch {
		case q.Kind == "retry":
			violate(InvNoPhantom, "%s", q.Marker)
		case q.Outcome == OutcomeOK && q.EventID != "":
			acked[q.EventID] = true
			if _, ok := byID[q.EventID]; !ok { // if it is, it was checked with the outbox rows
				v.Events.Lost++
				violate(InvNoLost, "%s event %s committed by the client is not in the outbox", q.Kind, q.EventID)
			}
		case q.Outcome == OutcomeOK && q.Version > 0:
			if !versions[q.AggregateID][q.Version] {
				v.Events.Lost++
				violate(InvNoLost, "%s of order %s answered version %d, but no event of that version reached the topic", q.Kind, q.AggregateID, q.Version)
			}
		case q.Outcome == OutcomeRejected && q.EventID != "":
			rolledBack[q.EventID] = true
		}
	}

	// No phantom: nothing on the topic that was not committed, nothing
	// for a rolled-back transaction or a rejected request.
	for id, cs := range copies {
		r := cs[0]
		switch {
		case rolledBack[id]:
			v.Events.Phantom++
			violate(InvNoPhantom, "event %s of a rolled-back transaction is on topic %s", id, r.Topic)
		case byID[id].ID == "":
			v.Events.Phantom++
			violate(InvNoPhantom, "event %s (%s %s) on topic %s is not in the outbox", id, r.EventType, r.AggregateID, r.Topic)
		}
	}
	for id := range rolledBack {
		if _, ok := byID[id]; ok {
			v.Events.Phantom++
			violate(InvNoPhantom, "event %s of a rolled-back transaction is in the outbox", id)
		}
	}
	for _, r := range obs.Outbox {
		for _, m := range r.Markers {
			v.Events.Phantom++
			violate(InvNoPhantom, "outbox message %s carries the marker %s of a rejected request", r.ID, m)
		}
	}
	if obs.Effects.MarkerRows > 0 {
		v.Events.Phantom += obs.Effects.MarkerRows
		violate(InvNoPhantom, "%d orders carry the marker of a rejected request", obs.Effects.MarkerRows)
	}

	// Per-aggregate order of first deliveries; stale redeliveries counted.
	for _, k := range aggOrder {
		var maxSeq int64 = -1
		seen := map[string]bool{}
		for _, r := range stream[k] {
			row, known := byID[r.EventID]
			if !known {
				continue // a phantom, reported above
			}
			if seen[r.EventID] {
				if row.Seq < maxSeq {
					v.Events.StaleRedeliveries++
				}
				continue
			}
			seen[r.EventID] = true
			if row.Seq < maxSeq {
				v.Events.OutOfOrder++
				violate(InvOrder, "%s %s/%s: event %s (seq %d) first delivered at offset %d after an event with seq %d", k.topic, k.typ, k.id, r.EventID, row.Seq, r.Offset, maxSeq)
			}
			maxSeq = max(maxSeq, row.Seq)
		}
	}

	// Duplicates: bounded, and only inside fault windows.
	inWindow := func(t time.Time) bool {
		for _, f := range obs.Faults {
			if !t.Before(f.Start) && !t.After(f.End.Add(b.Grace)) {
				return true
			}
		}
		return false
	}
	inOutage := func(t time.Time) bool {
		for _, f := range obs.Faults {
			if isOutage(f) && !t.Before(f.Start) && !t.After(f.End.Add(b.Grace)) {
				return true
			}
		}
		return false
	}
	var kills, outages []FaultWindow
	for _, f := range obs.Faults {
		switch {
		case f.Kind == FaultRelayKill, f.Kind == FaultLeaderKill, f.Kind == FaultRelayAfterAck, f.Kind == FaultRelayInMark, f.Kind == FaultRelayZombie:
			kills = append(kills, f)
		case isOutage(f):
			outages = append(outages, f)
		}
	}
	kills = killReach(kills, outages, b.Grace)
	for id, cs := range copies {
		n := len(cs)
		v.Duplicates.MaxCopies = max(v.Duplicates.MaxCopies, n)
		if n > 1 {
			v.Duplicates.Total += n - 1
		}
		bound := b.MaxCopies
		if b.OutageMaxCopies > bound && !slices.ContainsFunc(cs[1:], func(c TopicRecord) bool { return !inOutage(c.Timestamp) }) {
			bound = b.OutageMaxCopies
		}
		if n > bound && !eachCopyHasItsKill(cs[1:], kills) {
			violate(InvDuplicates, "event %s is on topic %s %d times; the bound is %d", id, cs[0].Topic, n, bound)
		}
		for _, c := range cs[1:] {
			if !inWindow(c.Timestamp) {
				v.Duplicates.OutsideFaults++
				violate(InvDuplicates, "a copy of event %s (offset %d, produced %s) is outside every fault window", id, c.Offset, c.Timestamp.Format(time.RFC3339Nano))
			}
		}
	}

	// Exactly one effect per event.
	checkEffects(obs, copies, violate, &v)

	// Dead letters only for the injected poison, and all of it.
	for _, r := range obs.Outbox {
		if r.Status == "DEAD_LETTER" && !poison[r.ID] {
			violate(InvDeadLetters, "message %s (%s %s/%s) is a dead letter but was not injected poison", r.ID, r.EventType, r.AggregateType, r.AggregateID)
		}
	}
	for id := range poison {
		r, ok := byID[id]
		switch {
		case !ok && acked[id]:
			violate(InvDeadLetters, "poison message %s is not in the outbox", id)
		case ok && r.Status != "DEAD_LETTER":
			violate(InvDeadLetters, "poison message %s is %s, not DEAD_LETTER", id, r.Status)
		case ok && len(copies[id]) > 0:
			violate(InvDeadLetters, "poison message %s is on topic %s", id, r.Topic)
		}
	}

	// Drain.
	if obs.Drained.IsZero() {
		violate(InvDrain, "the backlog did not drain within %s of the heal", b.DrainBound)
	} else {
		v.Drain = obs.Drained.Sub(obs.Healed)
		if v.Drain > b.DrainBound {
			violate(InvDrain, "the backlog drained %s after the heal; the bound is %s", v.Drain.Round(time.Millisecond), b.DrainBound)
		}
	}

	// Latency from enqueue to the first copy on the topic: under faults if
	// the event's life overlapped a fault (without the grace), else calm.
	var calm, faulty []time.Duration
	for id, cs := range copies {
		row, ok := byID[id]
		if !ok {
			continue
		}
		first := cs[0].Timestamp
		for _, c := range cs[1:] {
			if c.Timestamp.Before(first) {
				first = c.Timestamp
			}
		}
		lat := first.Sub(row.CreatedAt)
		overlaps := false
		for _, f := range obs.Faults {
			if !row.CreatedAt.After(f.End) && !first.Before(f.Start) {
				overlaps = true
				break
			}
		}
		if overlaps {
			faulty = append(faulty, lat)
		} else {
			calm = append(calm, lat)
		}
	}
	v.LatencyCalm, v.LatencyFaults = percentiles(calm), percentiles(faulty)

	checkResources(obs.Resources, violate)
	v.Stalls = pauseStalls(obs)

	for inv, list := range v.Violations {
		if len(list) == 0 {
			delete(v.Violations, inv)
		}
	}
	v.Pass = len(v.Violations) == 0
	return v
}

func checkEffects(obs Observations, copies map[string][]TopicRecord, violate func(string, string, ...any), v *Verdict) {
	ef := obs.Effects
	paid := map[string]bool{}
	placed := map[string]bool{}
	for id, cs := range copies {
		r := cs[0]
		if r.Topic != ef.OrdersTopic {
			continue
		}
		for _, c := range ef.Consumers {
			switch n := ef.Processed[c][id]; {
			case n == 1:
				v.Effects.Once++
			case n == 0:
				v.Effects.Missing++
				violate(InvEffects, "consumer %s has not processed event %s (%s of order %s)", c, id, r.EventType, r.AggregateID)
			default:
				v.Effects.Twice++
				violate(InvEffects, "consumer %s processed event %s %d times", c, id, n)
			}
		}
		switch r.EventType {
		case "OrderPlaced":
			placed[r.AggregateID] = true
		case "OrderPaid":
			paid[r.AggregateID] = true
		}
	}
	for _, o := range ef.Orders {
		if !placed[o.ID] {
			continue // its OrderPlaced is reported lost above, if it committed
		}
		for what, n := range map[string]int{"invoice": ef.Invoices[o.ID], "reservation": ef.Reservations[o.ID]} {
			switch {
			case n == 1:
				v.Effects.Once++
			case n == 0:
				v.Effects.Missing++
				violate(InvEffects, "order %s has no %s", o.ID, what)
			default:
				v.Effects.Twice++
				violate(InvEffects, "order %s has %d %ss", o.ID, n, what)
			}
		}
		wantInvoice, wantReservation, wantNotes := "", "", 0
		switch o.Status {
		case "PLACED":
			wantInvoice, wantReservation = "OPEN", "RESERVED"
		case "PAID":
			wantInvoice, wantReservation = "PAID", "RESERVED"
		case "SHIPPED":
			wantInvoice, wantReservation = "PAID", "SHIPPED"
		case "CANCELLED":
			wantInvoice, wantReservation = "VOID", "RELEASED"
			if paid[o.ID] {
				wantInvoice, wantNotes = "CREDITED", 1
			}
		}
		if got := ef.InvoiceStatus[o.ID]; got != wantInvoice {
			v.Effects.WrongState++
			violate(InvEffects, "order %s is %s (version %d) but its invoice is %q; want %q", o.ID, o.Status, o.Version, got, wantInvoice)
		}
		if got := ef.ReservationStatus[o.ID]; got != wantReservation {
			v.Effects.WrongState++
			violate(InvEffects, "order %s is %s (version %d) but its reservation is %q; want %q", o.ID, o.Status, o.Version, got, wantReservation)
		}
		if got := ef.CreditNotes[o.ID]; got != wantNotes {
			v.Effects.WrongState++
			violate(InvEffects, "order %s has %d credit notes; want %d", o.ID, got, wantNotes)
		}
	}
	for sku, initial := range ef.InitialStock {
		s := ef.Stock[sku]
		if s[0]+s[1]+ef.ShippedUnits[sku] != initial || s[1] != ef.ReservedUnits[sku] {
			v.Effects.StockErrors++
			violate(InvEffects, "stock of %s not conserved: %d available + %d reserved + %d shipped != %d initial, or reserved != %d units in RESERVED reservations",
				sku, s[0], s[1], ef.ShippedUnits[sku], initial, ef.ReservedUnits[sku])
		}
	}
}

func percentiles(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return Latency{N: len(ds), P50: at(0.50), P99: at(0.99), Max: ds[len(ds)-1]}
}

// isOutage reports whether f cuts the relays off the broker: the broker
// stopped, or any fault on its link (a slow link holds records in the
// producers as a cut one does, until the publish timeout).
func isOutage(f FaultWindow) bool {
	return f.Kind == FaultBrokerStop || f.Target == "broker" && strings.HasPrefix(f.Kind, "link-")
}

// killReach returns the windows in which each kill may cause a copy: from
// the kill's start to its end plus grace, and, when a broker outage begins
// before that, to the outage's end plus grace: the relay that publishes
// again what the killed one left unrecorded cannot do so while the broker
// is away, and its copy is produced when it tries, during the outage or
// after it. Outages that follow one another extend the window in turn.
func killReach(kills, outages []FaultWindow, grace time.Duration) []FaultWindow {
	reach := make([]FaultWindow, len(kills))
	for i, k := range kills {
		end := k.End.Add(grace)
		for extended := true; extended; {
			extended = false
			for _, o := range outages {
				if !o.Start.After(end) && o.End.Add(grace).After(end) {
					end, extended = o.End.Add(grace), true
				}
			}
		}
		k.End = end
		reach[i] = k
	}
	return reach
}

// eachCopyHasItsKill reports whether every copy can be matched to a kill
// of its own whose window (see killReach) holds the copy's timestamp.
// Greedy: in time order, each copy takes the unmatched window that ends
// first among those holding it, which finds a full matching if there is
// one (windows are intervals, copies points).
func eachCopyHasItsKill(extra []TopicRecord, kills []FaultWindow) bool {
	if len(extra) > len(kills) {
		return false
	}
	ts := make([]time.Time, len(extra))
	for i, c := range extra {
		ts[i] = c.Timestamp
	}
	slices.SortFunc(ts, time.Time.Compare)
	used := make([]bool, len(kills))
	for _, t := range ts {
		best := -1
		for i, k := range kills {
			if used[i] || t.Before(k.Start) || t.After(k.End) {
				continue
			}
			if best < 0 || k.End.Before(kills[best].End) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		used[best] = true
	}
	return true
}
