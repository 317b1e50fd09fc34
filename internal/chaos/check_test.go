package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// healthy is a run where everything held: order O1 placed (e1) and paid
// (e2), a poison message dead-lettered, a rolled-back probe nowhere, one
// relay kill between 10 s and 11 s.
func healthy() (Observations, Bounds) {
	rec := func(id, typ string, off int64, version int64, at time.Duration) TopicRecord {
		return TopicRecord{Topic: "orders", Partition: 1, Offset: off, EventID: id, AggregateType: "Order", AggregateID: "O1",
			EventType: typ, Version: version, Timestamp: t0.Add(at)}
	}
	obs := Observations{
		Healed:  t0.Add(60 * time.Second),
		Drained: t0.Add(65 * time.Second),
		Faults:  []FaultWindow{{Kind: FaultRelayKill, Target: "relay-1", Start: t0.Add(10 * time.Second), End: t0.Add(11 * time.Second)}},
		Requests: []Request{
			{Kind: "place", Outcome: OutcomeOK, AggregateID: "O1", Version: 1},
			{Kind: "pay", Outcome: OutcomeOK, AggregateID: "O1", Version: 2},
			{Kind: "probe", Outcome: OutcomeRejected, EventID: "r1"},
			{Kind: "poison", Outcome: OutcomeOK, EventID: "p1"},
			{Kind: "invalid", Outcome: OutcomeRejected, Marker: "REJECT-1"},
		},
		Outbox: []OutboxRow{
			{ID: "e1", AggregateType: "Order", AggregateID: "O1", EventType: "OrderPlaced", Topic: "orders", Status: "SENT", Seq: 1, CreatedAt: t0.Add(time.Second)},
			{ID: "e2", AggregateType: "Order", AggregateID: "O1", EventType: "OrderPaid", Topic: "orders", Status: "SENT", Seq: 2, CreatedAt: t0.Add(2 * time.Second)},
			{ID: "p1", AggregateType: "ChaosPoison", AggregateID: "poison-0", EventType: "Poison", Topic: "chaos.probe", Status: "DEAD_LETTER", Seq: 3, CreatedAt: t0.Add(3 * time.Second)},
		},
		Records: []TopicRecord{rec("e1", "OrderPlaced", 0, 1, time.Second+5*time.Millisecond), rec("e2", "OrderPaid", 1, 2, 2*time.Second+5*time.Millisecond)},
		Poison:  []string{"p1"},
		Resources: []ResourceSeries{{Relay: "relay-1", Samples: []ResourceSample{
			{At: 0, Phase: SampleLoad, PID: 10, RSS: 20 << 20, Goroutines: 30, Conns: 3},
			{At: time.Minute, Phase: SampleLoad, PID: 10, RSS: 40 << 20, Goroutines: 45, Conns: 6},
			{At: 2 * time.Minute, Phase: SampleEnd, PID: 11, RSS: -1, Goroutines: -1, Conns: -1}, // paused, or restarting
			{At: 2*time.Minute + time.Second, Phase: SampleDrained, PID: 11, RSS: 60 << 20, Goroutines: 80, Conns: 8},
		}}},
		Effects: Effects{
			Consumers: []string{"billing", "inventory-service"}, OrdersTopic: "orders",
			Processed: map[string]map[string]int{"billing": {"e1": 1, "e2": 1}, "inventory-service": {"e1": 1, "e2": 1}},
			Orders:    []Order{{ID: "O1", Status: "PAID", Version: 2}},
			Invoices:  map[string]int{"O1": 1}, InvoiceStatus: map[string]string{"O1": "PAID"},
			Reservations: map[string]int{"O1": 1}, ReservationStatus: map[string]string{"O1": "RESERVED"},
			CreditNotes: map[string]int{},
			Stock:       map[string][2]int64{"BOOK-1": {8, 2}}, InitialStock: map[string]int64{"BOOK-1": 10},
			ReservedUnits: map[string]int64{"BOOK-1": 2}, ShippedUnits: map[string]int64{},
		},
	}
	return obs, Bounds{MaxCopies: 3, Grace: 5 * time.Second, DrainBound: 30 * time.Second}
}

func TestCheck_HealthyRun_Passes(t *testing.T) {
	obs, b := healthy()
	v := Check(obs, b)
	if !v.Pass {
		t.Fatalf("healthy run: %s %v", v.Result(), v.Violations)
	}
	if v.Events.Committed != 2 || v.Events.Delivered != 2 || v.DeadLetters.Actual != 1 || v.DeadLetters.Expected != 1 {
		t.Errorf("events %+v, dead letters %+v; want 2 committed and delivered, 1 dead letter expected and actual", v.Events, v.DeadLetters)
	}
	if v.Drain != 5*time.Second || v.LatencyCalm.N != 2 || v.LatencyCalm.Max != 5*time.Millisecond {
		t.Errorf("drain %s, calm latency %+v; want 5s and two events of 5ms", v.Drain, v.LatencyCalm)
	}
	if v.Requests != (RequestCounts{OK: 3, Rejected: 2}) {
		t.Errorf("requests %+v; want 3 ok, 2 rejected", v.Requests)
	}
}

// Each fabricated fault of the system must be reported, naming the
// invariant it breaks, and only that one.
func TestCheck_FabricatedViolations_FailNamingTheInvariant(t *testing.T) {
	copyOf := func(obs *Observations, i int, offset int64, at time.Duration) {
		c := obs.Records[i]
		c.Offset, c.Timestamp = offset, t0.Add(at)
		obs.Records = append(obs.Records, c)
	}
	cases := []struct {
		name   string
		breaks []string
		mutate func(*Observations)
		check  func(*testing.T, Verdict)
	}{
		{"lost: a committed and acknowledged event never reached the topic", []string{InvNoLost}, func(o *Observations) {
			o.Records = o.Records[:1]
		}, func(t *testing.T, v Verdict) {
			if v.Events.Lost != 2 { // the outbox row and the client's acknowledged pay
				t.Errorf("lost %d; want 2", v.Events.Lost)
			}
		}},
		{"lost: a probe the client committed is not in the outbox", []string{InvNoLost}, func(o *Observations) {
			o.Requests = append(o.Requests, Request{Kind: "probe", Outcome: OutcomeOK, EventID: "gone"})
		}, nil},
		{"duplicate outside every fault window", []string{InvDuplicates}, func(o *Observations) {
			copyOf(o, 0, 2, 40*time.Second)
		}, func(t *testing.T, v Verdict) {
			if v.Duplicates.OutsideFaults != 1 || v.Duplicates.Total != 1 || v.Duplicates.MaxCopies != 2 {
				t.Errorf("duplicates %+v; want 1 outside, 1 in all, max 2 copies", v.Duplicates)
			}
			if v.Events.StaleRedeliveries != 1 {
				t.Errorf("stale redeliveries %d; want 1 (e1 again after e2)", v.Events.StaleRedeliveries)
			}
		}},
		{"more copies than the bound, inside a fault window", []string{InvDuplicates}, func(o *Observations) {
			for i := range 3 {
				copyOf(o, 1, int64(2+i), 12*time.Second)
			}
		}, nil},
		{"out of order: a later event first delivered before an earlier one", []string{InvOrder}, func(o *Observations) {
			o.Records[0].Offset, o.Records[1].Offset = 1, 0
		}, func(t *testing.T, v Verdict) {
			if v.Events.OutOfOrder != 1 {
				t.Errorf("out of order %d; want 1", v.Events.OutOfOrder)
			}
		}},
		{"phantom: an event of a rolled-back transaction on the topic", []string{InvNoPhantom}, func(o *Observations) {
			o.Records = append(o.Records, TopicRecord{Topic: "chaos.probe", EventID: "r1", AggregateType: "ChaosProbe", AggregateID: "hot-0", Timestamp: t0})
		}, nil},
		{"phantom: an event that is in no outbox", []string{InvNoPhantom}, func(o *Observations) {
			o.Records = append(o.Records, TopicRecord{Topic: "chaos.probe", EventID: "x", AggregateType: "ChaosProbe", AggregateID: "hot-0", Timestamp: t0})
		}, nil},
		{"phantom: a rejected request's marker in an order", []string{InvNoPhantom}, func(o *Observations) {
			o.Effects.MarkerRows = 1
		}, nil},
		{"effect missing: a consumer never processed an event", []string{InvEffects}, func(o *Observations) {
			o.Effects.Processed["billing"]["e2"] = 0
		}, func(t *testing.T, v Verdict) {
			if v.Effects.Missing != 1 {
				t.Errorf("missing %d; want 1", v.Effects.Missing)
			}
		}},
		{"effect twice: two invoices for one order", []string{InvEffects}, func(o *Observations) {
			o.Effects.Invoices["O1"] = 2
		}, func(t *testing.T, v Verdict) {
			if v.Effects.Twice != 1 {
				t.Errorf("twice %d; want 1", v.Effects.Twice)
			}
		}},
		{"effect twice: stock reserved twice", []string{InvEffects}, func(o *Observations) {
			o.Effects.Stock["BOOK-1"] = [2]int64{6, 4}
		}, nil},
		{"wrong state: paid order with an open invoice", []string{InvEffects}, func(o *Observations) {
			o.Effects.InvoiceStatus["O1"] = "OPEN"
		}, nil},
		{"dead letter that was not poison (so never delivered either)", []string{InvNoLost, InvDeadLetters}, func(o *Observations) {
			o.Outbox = append(o.Outbox, OutboxRow{ID: "e3", AggregateType: "ChaosProbe", AggregateID: "hot-1", Topic: "chaos.probe", Status: "DEAD_LETTER", Seq: 4})
		}, nil},
		{"poison published instead of dead-lettered", []string{InvDeadLetters}, func(o *Observations) {
			o.Outbox[2].Status = "SENT"
			o.Records = append(o.Records, TopicRecord{Topic: "chaos.probe", EventID: "p1", AggregateType: "ChaosPoison", AggregateID: "poison-0", Timestamp: t0.Add(4 * time.Second)})
		}, nil},
		{"never drained", []string{InvDrain}, func(o *Observations) {
			o.Drained = time.Time{}
		}, nil},
		{"drained too late", []string{InvDrain}, func(o *Observations) {
			o.Drained = o.Healed.Add(time.Minute)
		}, nil},
		{"a relay's goroutines grew", []string{InvResourcesFlat}, func(o *Observations) {
			o.Resources[0].Samples[3].Goroutines = 30*3/2 + FlatSlackGoroutines + 1 // the median of the first half is 30
		}, nil},
		{"a relay's resident memory grew", []string{InvResourcesFlat}, func(o *Observations) {
			o.Resources[0].Samples[3].RSS = 30<<20 + FlatSlackRSS + 1
		}, nil},
		{"a relay's connections grew", []string{InvResourcesFlat}, func(o *Observations) {
			o.Resources[0].Samples[3].Conns = 4 + FlatSlackConns + 1
		}, func(t *testing.T, v Verdict) {
			if got, want := v.Violations[InvResourcesFlat][0], fmt.Sprintf("relay-1: database connections grew to %d (pid 11", 4+FlatSlackConns+1); !strings.Contains(got, want) {
				t.Errorf("violation %q; want it to name the relay, the figure, the value and the pid", got)
			}
		}},
		{"the harness could not read something", []string{InvNoUnknownFail}, func(o *Observations) {
			o.ReadErrors = []string{"read the topics: timeout"}
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs, b := healthy()
			c.mutate(&obs)
			v := Check(obs, b)
			if v.Pass {
				t.Fatalf("PASS; want FAIL naming %v", c.breaks)
			}
			if got := v.Violated(); !slices.Equal(got, c.breaks) {
				t.Errorf("violated %v; want %v\n%v", got, c.breaks, v.Violations)
			}
			var table strings.Builder
			Report{Verdict: v}.WriteTable(&table)
			if !strings.Contains(table.String(), "RESULT FAIL: "+strings.Join(c.breaks, ", ")) {
				t.Errorf("table does not end in the FAIL naming %v:\n%s", c.breaks, table.String())
			}
			if c.check != nil {
				c.check(t, v)
			}
		})
	}
}

// A duplicate inside a fault window (a relay killed after the broker's ack,
// sent again once the lease expired), and a stale redelivery, are allowed
// and counted.
func TestCheck_DuplicateInsideFaultWindow_PassesAndIsCounted(t *testing.T) {
	obs, b := healthy()
	c := obs.Records[0]
	c.Offset, c.Timestamp = 2, t0.Add(14*time.Second) // after the kill, within the grace
	obs.Records = append(obs.Records, c)
	v := Check(obs, b)
	if !v.Pass {
		t.Fatalf("%s %v; want PASS", v.Result(), v.Violations)
	}
	if v.Duplicates != (DupCounts{Total: 1, MaxCopies: 2}) || v.Events.StaleRedeliveries != 1 {
		t.Errorf("duplicates %+v, stale %d; want 1 duplicate inside a window and 1 stale redelivery", v.Duplicates, v.Events.StaleRedeliveries)
	}
}

func TestPlanFaults_SameSeedSameSchedule(t *testing.T) {
	cfg := Config{Seed: 7, PGRestart: true}.withDefaults()
	a, b := planFaults(7, cfg), planFaults(7, cfg)
	if !slices.Equal(a, b) {
		t.Fatal("two plans of seed 7 differ")
	}
	if c := planFaults(8, cfg); slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same plan")
	}
	kinds := map[string]bool{}
	for _, f := range a {
		kinds[f.Kind] = true
		if f.At < 0 || f.At > cfg.Duration {
			t.Errorf("fault %+v outside the run", f)
		}
	}
	if len(kinds) < 6 {
		t.Errorf("a 2-minute plan has only %d kinds of fault: %v", len(kinds), kinds)
	}
}

func TestConfig_BadFieldNamed(t *testing.T) {
	for field, cfg := range map[string]Config{
		"DatabaseURL": {DatabaseURL: "host=x"},
		"Duration":    {Duration: time.Second},
		"Relays":      {Relays: 1},
		"Lease":       {Lease: time.Millisecond},
	} {
		err := cfg.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v; want one naming %s", field, err, field)
		}
	}
}

// During a broker outage every relay that claims an event may leave a copy
// in its producer: more copies than MaxCopies pass if all the extra ones
// were produced inside the outage's window, up to OutageMaxCopies; the same
// number inside another fault's window, or more than OutageMaxCopies, fail.
func TestCheck_CopiesOfABrokerOutage_HaveTheirOwnBound(t *testing.T) {
	withCopies := func(kind, target string, n int) Verdict {
		obs, b := healthy()
		b.OutageMaxCopies = 6
		obs.Faults = []FaultWindow{{Kind: kind, Target: target, Start: t0.Add(10 * time.Second), End: t0.Add(20 * time.Second)}}
		for i := range n - 1 {
			c := obs.Records[1]
			c.Offset, c.Timestamp = int64(2+i), t0.Add(time.Duration(11+i)*time.Second)
			obs.Records = append(obs.Records, c)
		}
		return Check(obs, b)
	}
	for _, c := range []struct {
		kind, target string
		copies       int
		pass         bool
	}{
		{FaultBrokerStop, "broker", 5, true},
		{FaultLinkBlackhole, "broker", 6, true},
		{FaultBrokerStop, "broker", 7, false},
		{FaultRelayKill, "relay-1", 5, false},
		{FaultLinkBlackhole, "pg-relay-1", 5, false},
	} {
		v := withCopies(c.kind, c.target, c.copies)
		if v.Pass != c.pass {
			t.Errorf("%d copies inside a %s window on %s: %s %v; want pass %v", c.copies, c.kind, c.target, v.Result(), v.Violations, c.pass)
		}
		if !c.pass && len(v.Violations[InvDuplicates]) == 0 {
			t.Errorf("%d copies inside a %s window on %s failed, but not %s: %v", c.copies, c.kind, c.target, InvDuplicates, v.Violations)
		}
	}
}

// withOutage returns faults and a broker outage from t0+from to t0+to.
func withOutage(faults []FaultWindow, from, to time.Duration) []FaultWindow {
	return append(slices.Clone(faults), FaultWindow{Kind: FaultBrokerStop, Target: "broker", Start: t0.Add(from), End: t0.Add(to)})
}

// A relay killed after the broker acknowledged a record it had not marked
// leaves that record to be published again, each time it happens: beyond
// MaxCopies, every extra copy passes if it has a relay kill of its own
// whose window holds it, extended by a broker outage that began within it
// (the copy is produced when the next relay tries to publish); one kill too
// few, or a kind of fault that kills no relay, fails.
func TestCheck_CopiesBeyondTheBound_NeedAKillEach(t *testing.T) {
	kill := func(kind string, at time.Duration) FaultWindow {
		return FaultWindow{Kind: kind, Target: "relay-1", Start: t0.Add(at), End: t0.Add(at + 100*time.Millisecond)}
	}
	withCopies := func(faults []FaultWindow, at ...time.Duration) Verdict {
		obs, b := healthy()
		obs.Faults = faults
		for i, d := range at {
			c := obs.Records[1]
			c.Offset, c.Timestamp = int64(2+i), t0.Add(d)
			obs.Records = append(obs.Records, c)
		}
		return Check(obs, b)
	}
	three := []FaultWindow{kill(FaultRelayAfterAck, 10*time.Second), kill(FaultRelayAfterAck, 13*time.Second), kill(FaultRelayKill, 16*time.Second)}
	for _, c := range []struct {
		name   string
		faults []FaultWindow
		copies []time.Duration // the extra copies' timestamps
		pass   bool
	}{
		{"3 extra copies, each after a kill of its own", three, []time.Duration{11 * time.Second, 14 * time.Second, 17 * time.Second}, true},
		{"4 extra copies, 3 kills", three, []time.Duration{11 * time.Second, 12 * time.Second, 14 * time.Second, 17 * time.Second}, false},
		{"the last copy inside its kill's grace", three, []time.Duration{11 * time.Second, 14 * time.Second, 20500 * time.Millisecond}, true},
		{"the last copy after its kill's grace", three, []time.Duration{11 * time.Second, 14 * time.Second, 22 * time.Second}, false},
		{"3 extra copies, two before the second kill began", three, []time.Duration{11 * time.Second, 12 * time.Second, 14 * time.Second}, false},
		{"the last copy delayed by a broker outage that began inside its kill's grace", withOutage(three, 19*time.Second, 40*time.Second),
			[]time.Duration{11 * time.Second, 14 * time.Second, 43 * time.Second}, true},
		{"the last copy after that outage's grace", withOutage(three, 19*time.Second, 40*time.Second),
			[]time.Duration{11 * time.Second, 14 * time.Second, 46 * time.Second}, false},
		{"the last copy after an outage that began after its kill's grace", withOutage(three, 30*time.Second, 40*time.Second),
			[]time.Duration{11 * time.Second, 14 * time.Second, 41 * time.Second}, false},
		{"3 extra copies after link faults", []FaultWindow{
			{Kind: FaultLinkReset, Target: "pg-relay-1", Start: t0.Add(10 * time.Second), End: t0.Add(11 * time.Second)},
			{Kind: FaultLinkReset, Target: "pg-relay-1", Start: t0.Add(13 * time.Second), End: t0.Add(14 * time.Second)},
			{Kind: FaultLinkReset, Target: "pg-relay-1", Start: t0.Add(16 * time.Second), End: t0.Add(17 * time.Second)},
		}, []time.Duration{11 * time.Second, 14 * time.Second, 17 * time.Second}, false},
	} {
		v := withCopies(c.faults, c.copies...)
		if v.Pass != c.pass {
			t.Errorf("%s: %s %v; want pass %v", c.name, v.Result(), v.Violations, c.pass)
		}
		if !c.pass && len(v.Violations[InvDuplicates]) == 0 {
			t.Errorf("%s failed, but not %s: %v", c.name, InvDuplicates, v.Violations)
		}
	}
}
