package chaos

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// Fault kinds.
const (
	FaultRelayKill       = "relay-kill"           // SIGKILL a relay at a random moment
	FaultLeaderKill      = "relay-kill-leader"    // SIGKILL the leading relay at a random moment (CDC)
	FaultRelayAfterAck   = "relay-kill-after-ack" // SIGKILL a relay when the broker has a record it has not marked
	FaultRelayInMark     = "relay-kill-in-mark"   // SIGKILL a relay inside its mark transaction
	FaultRelayZombie     = "relay-zombie"         // SIGSTOP a relay (the leader, if any) past its lease, then SIGCONT
	FaultRollingRestart  = "rolling-restart"      // SIGTERM and restart each relay in turn
	FaultConsumerKill    = "consumer-kill"        // SIGKILL billing or inventory
	FaultOrdersKill      = "orders-kill"          // SIGKILL an order service
	FaultBrokerStop      = "broker-stop"          // stop the broker for 10-20 s, restart it on its data
	FaultPGRestart       = "pg-restart"           // pg_ctlcluster restart -m fast or immediate
	FaultLinkLatency     = "link-latency"         // toxiproxy latency on a link
	FaultLinkReset       = "link-reset"           // close a link's connections and refuse new ones
	FaultLinkBlackhole   = "link-blackhole"       // data stops flowing on a link
	FaultLinkBandwidth   = "link-bandwidth"       // a link limited to 16 KB/s
	FaultLateCommit      = "late-commit"          // a transaction held open for seconds, then committed
	FaultLateRollback    = "late-rollback"        // the same, rolled back
	FaultPoison          = "poison"               // an oversized message the broker refuses
	poisonPayloadBytes   = 400 << 10              // over brokerMaxMessageBytes
	failpointAfterAck    = "relay-after-ack"
	failpointInMark      = "pgstore-mark-sent-before-commit"
	failpointCursorSave  = "pgstore-cursor-save-before-commit" // relay-kill-in-mark in cursor mode
	followLeaderEvery    = 250 * time.Millisecond
	lateHitGrace         = time.Second
	failpointWait        = 20 * time.Second
	restartWithin        = 60 * time.Second
	concurrentFaultKinds = "late-commit late-rollback poison"
	// targetLeader is the planned target of a fault aimed at whichever
	// relay leads when it is injected (cursor and CDC).
	targetLeader = "leader"
	leaderWait   = 10 * time.Second
)

// PlannedFault is one entry of the schedule a seed gives.
type PlannedFault struct {
	// At is the offset from the start of the load.
	At     time.Duration `json:"atMs"`
	Kind   string        `json:"kind"`
	Target string        `json:"target,omitempty"`
	// Hold is how long the fault lasts (down time, pause, toxic).
	Hold    time.Duration `json:"holdMs,omitempty"`
	Variant string        `json:"variant,omitempty"`
}

// MarshalJSON writes the durations in milliseconds.
func (p PlannedFault) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"atMs":%d,"kind":%q,"target":%q,"holdMs":%d,"variant":%q}`,
		p.At.Milliseconds(), p.Kind, p.Target, p.Hold.Milliseconds(), p.Variant), nil
}

// weightedFault is a kind of exclusive fault and its weight in the draw.
type weightedFault struct {
	kind   string
	weight int
}

// faultWeights are the exclusive faults the schedule draws from, for the
// config's strategy.
func faultWeights(cfg Config) []weightedFault {
	kinds := []weightedFault{
		{FaultRelayKill, 4}, {FaultRelayAfterAck, 3}, {FaultRelayInMark, 2}, {FaultRelayZombie, 3},
		{FaultRollingRestart, 1}, {FaultConsumerKill, 3}, {FaultOrdersKill, 1}, {FaultBrokerStop, 1},
		{FaultLinkLatency, 3}, {FaultLinkReset, 3}, {FaultLinkBlackhole, 2}, {FaultLinkBandwidth, 1},
	}
	if cfg.Strategy == StrategyCDC {
		// The CDC stream records its marks in one statement, with no
		// transaction to stop inside: the leader is killed at random
		// moments instead of inside a mark.
		kinds = slices.Replace(kinds, 2, 3, weightedFault{FaultLeaderKill, 2})
	}
	if cfg.PGRestart {
		kinds = append(kinds, weightedFault{FaultPGRestart, 1})
	}
	return kinds
}

// planFaults derives the fault schedule from the seed: the same seed and
// config give the same schedule.
func planFaults(seed int64, cfg Config) []PlannedFault {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	relay := func() string { return fmt.Sprintf("relay-%d", 1+rng.IntN(cfg.Relays)) }
	linkNames := []string{"broker", "broker"}
	for i := range cfg.Relays {
		linkNames = append(linkNames, fmt.Sprintf("pg-relay-%d", i+1))
	}
	for i := range cfg.OrderServices {
		linkNames = append(linkNames, fmt.Sprintf("pg-orders-%d", i+1))
	}
	linkNames = append(linkNames, "pg-billing", "pg-inventory")
	link := func() string { return linkNames[rng.IntN(len(linkNames))] }

	kinds := faultWeights(cfg)
	leads := cfg.Strategy == StrategyCursor || cfg.Strategy == StrategyCDC
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	var plan []PlannedFault
	end := cfg.Duration - 3*time.Second
	lastBroker, lastPG := -time.Hour, -time.Hour
	for at := between(2*time.Second, 4*time.Second); at < end; {
		n := rng.IntN(total)
		var kind string
		for _, k := range kinds {
			if n < k.weight {
				kind = k.kind
				break
			}
			n -= k.weight
		}
		f := PlannedFault{At: at, Kind: kind}
		switch kind {
		case FaultRelayKill:
			f.Target, f.Hold = relay(), between(200*time.Millisecond, 3*time.Second)
		case FaultLeaderKill:
			f.Target, f.Hold = targetLeader, between(200*time.Millisecond, 3*time.Second)
		case FaultRelayAfterAck, FaultRelayInMark:
			f.Target = relay()
			if cfg.Strategy == StrategyCDC {
				f.Target = targetLeader
			}
		case FaultRelayZombie:
			f.Target, f.Hold = relay(), cfg.Lease+between(time.Second, 2*cfg.Lease)
			if leads {
				f.Target = targetLeader
			}
		case FaultConsumerKill:
			f.Target, f.Hold = []string{"billing", "inventory"}[rng.IntN(2)], between(200*time.Millisecond, 2*time.Second)
		case FaultOrdersKill:
			f.Target, f.Hold = fmt.Sprintf("orders-%d", 1+rng.IntN(cfg.OrderServices)), between(500*time.Millisecond, 2*time.Second)
		case FaultBrokerStop:
			if at-lastBroker < 45*time.Second {
				f.Kind, f.Target, f.Hold = FaultRelayKill, relay(), between(200*time.Millisecond, 3*time.Second)
				break
			}
			f.Target, f.Hold, lastBroker = "broker", between(10*time.Second, 20*time.Second), at
		case FaultPGRestart:
			if at-lastPG < 30*time.Second {
				f.Kind, f.Target, f.Hold = FaultLinkReset, link(), between(time.Second, 4*time.Second)
				break
			}
			f.Target, f.Variant, lastPG = "postgresql", []string{"fast", "immediate"}[rng.IntN(2)], at
		case FaultLinkLatency:
			f.Target, f.Hold = link(), between(3*time.Second, 8*time.Second)
			f.Variant = fmt.Sprintf("%dms", 50+rng.IntN(400))
		case FaultLinkReset:
			f.Target, f.Hold = link(), between(time.Second, 4*time.Second)
		case FaultLinkBlackhole:
			f.Target, f.Hold = link(), between(time.Second, 2*cfg.Lease)
		case FaultLinkBandwidth:
			f.Target, f.Hold = link(), between(3*time.Second, 8*time.Second)
		}
		plan = append(plan, f)
		at += f.Hold + between(cfg.FaultGap/2, cfg.FaultGap*3/2)
	}
	// Concurrent with the others: late commits and poison at random moments.
	for range max(1, int(cfg.Duration/(15*time.Second))) {
		kind := FaultLateCommit
		if rng.IntN(3) == 0 {
			kind = FaultLateRollback
		}
		plan = append(plan, PlannedFault{At: between(time.Second, end), Kind: kind, Hold: between(2*time.Second, 6*time.Second),
			Target: fmt.Sprintf("late-%d", len(plan))})
	}
	for i := range max(0, cfg.Poison) {
		plan = append(plan, PlannedFault{At: between(time.Second, end), Kind: FaultPoison, Target: fmt.Sprintf("poison-%d", i)})
	}
	return plan
}

// runFaults executes the plan until ctx is done: the exclusive faults one
// after the other (a late one starts when the previous ended), the
// concurrent ones at their time.
func (h *harness) runFaults(ctx context.Context, plan []PlannedFault) {
	start := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, f := range plan {
		if strings.Contains(concurrentFaultKinds, f.Kind) {
			wg.Go(func() {
				sleep(ctx, time.Until(start.Add(f.At)))
				if ctx.Err() == nil {
					h.inject(ctx, f)
				}
			})
		}
	}
	for _, f := range plan {
		if strings.Contains(concurrentFaultKinds, f.Kind) {
			continue
		}
		sleep(ctx, time.Until(start.Add(f.At)))
		if ctx.Err() != nil {
			return
		}
		h.inject(ctx, f)
	}
}

func (h *harness) component(name string) *component {
	for _, c := range h.all() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// CutOffByTheEnd starts the reason of a fault in Report.Skipped that was
// still waiting for its moment when the load ended.
const CutOffByTheEnd = "cut off by the end of the load"

// inject runs one fault and heals it (early when ctx ends), recording its
// window. A fault aimed at the leader hits the relay that leads then.
func (h *harness) inject(ctx context.Context, f PlannedFault) {
	var err error
	if f.Target == targetLeader {
		f.Target, err = h.awaitLeader(ctx)
	}
	began := time.Now()
	if err == nil {
		err = h.injectFault(ctx, f)
	}
	ended := time.Now()
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The load ended while the fault waited for its moment (a failpoint
		// no message had reached yet): the schedule ran out, not the fault.
		err = fmt.Errorf("%s: %w", CutOffByTheEnd, err)
	}
	h.mu.Lock()
	if err != nil {
		h.skipped = append(h.skipped, fmt.Sprintf("%s %s at %s: %v", f.Kind, f.Target, f.At.Round(time.Millisecond), err))
	} else {
		h.counts[f.Kind]++
	}
	switch f.Kind {
	case FaultLateCommit, FaultLateRollback, FaultPoison: // workload, not faults: no duplicate is excused by them
	default:
		h.windows = append(h.windows, FaultWindow{Kind: f.Kind, Target: f.Target, Start: began, End: ended})
	}
	h.mu.Unlock()
	detail := f.Variant
	if f.Hold > 0 {
		detail = strings.TrimSpace(detail + " " + f.Hold.Round(time.Millisecond).String())
	}
	if err != nil {
		h.logf("fault %-20s %-14s %s: not injected: %v", f.Kind, f.Target, detail, err)
	} else {
		h.logf("fault %-20s %-14s %s (%s)", f.Kind, f.Target, detail, ended.Sub(began).Round(time.Millisecond))
	}
}

// injectFault runs fault f until it is healed.
func (h *harness) injectFault(ctx context.Context, f PlannedFault) error {
	switch f.Kind {
	case FaultLinkLatency, FaultLinkReset, FaultLinkBlackhole, FaultLinkBandwidth:
		return h.injectLinkFault(ctx, f)
	case FaultLateCommit, FaultLateRollback:
		return h.injectLateCommit(ctx, f)
	case FaultPoison:
		return h.injectPoison(ctx, f)
	}
	return h.injectProcessFault(ctx, f)
}

// injectProcessFault kills, pauses or restarts processes (the relays, the
// consumers, the order services, the broker, PostgreSQL).
func (h *harness) injectProcessFault(ctx context.Context, f PlannedFault) error {
	c := h.component(f.Target)
	switch f.Kind {
	case FaultRelayKill, FaultLeaderKill, FaultConsumerKill, FaultOrdersKill:
		c.kill()
		sleep(ctx, f.Hold)
		return c.start(restartWithin)
	case FaultRelayAfterAck, FaultRelayInMark:
		return h.killAtFailpoint(ctx, c, h.failpointOf(f.Kind))
	case FaultRelayZombie:
		if err := c.signal(sigStop); err != nil {
			return err
		}
		sleep(ctx, f.Hold)
		return c.signal(sigCont)
	case FaultRollingRestart:
		for _, r := range h.relays {
			r.stop(15 * time.Second)
			if err := r.start(restartWithin); err != nil {
				return err
			}
			sleep(ctx, 500*time.Millisecond)
		}
		return nil
	case FaultBrokerStop:
		h.broker.stop(15 * time.Second)
		sleep(ctx, f.Hold)
		return h.broker.start(restartWithin)
	case FaultPGRestart:
		return h.restartPostgreSQL(f.Variant)
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

// failpointOf is the failpoint a relay is killed at for kind
// (FaultRelayAfterAck or FaultRelayInMark).
func (h *harness) failpointOf(kind string) string {
	switch {
	case kind == FaultRelayAfterAck:
		return failpointAfterAck
	case h.cfg.Strategy == StrategyCursor:
		// The leader marks cursor messages in memory: kill it inside the
		// save of its position rather than in a mark.
		return failpointCursorSave
	}
	return failpointInMark
}

// restartPostgreSQL restarts the cluster Config.PGCluster names, in mode
// (fast or immediate).
func (h *harness) restartPostgreSQL(mode string) error {
	parts := strings.Fields(h.cfg.PGCluster)
	if len(parts) != 2 {
		return fmt.Errorf("PGCluster %q is not \"version name\"", h.cfg.PGCluster)
	}
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", parts[0], parts[1], "restart", "-m", mode).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster restart -m %s: %w: %s", mode, err, out)
	}
	return nil
}

// injectLinkFault adds a toxic to (or cuts) the link f.Target for f.Hold,
// then heals it.
func (h *harness) injectLinkFault(ctx context.Context, f PlannedFault) error {
	var err error
	switch f.Kind {
	case FaultLinkLatency:
		ms := strings.TrimSuffix(f.Variant, "ms")
		err = h.links.toxic(f.Target, "latency", "both", `{"latency":`+ms+`,"jitter":50}`)
	case FaultLinkReset:
		err = h.links.cut(f.Target)
	case FaultLinkBlackhole:
		err = h.links.toxic(f.Target, "timeout", "both", `{"timeout":0}`)
	case FaultLinkBandwidth:
		err = h.links.toxic(f.Target, "bandwidth", "both", `{"rate":16}`)
	}
	if err != nil {
		return err
	}
	sleep(ctx, f.Hold)
	return h.links.heal(f.Target)
}

// injectLateCommit enqueues a probe message in a transaction held open
// for f.Hold, then committed (FaultLateCommit) or rolled back, and records
// the request's outcome.
func (h *harness) injectLateCommit(ctx context.Context, f PlannedFault) error {
	rollback := f.Kind == FaultLateRollback
	msg := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "ChaosProbe", AggregateID: f.Target,
		EventType: "LateCommit", Topic: topicProbe, Payload: []byte(`{"late":true}`)}
	err := h.enqueue(ctx, msg, f.Hold, rollback)
	q := Request{Kind: "late", AggregateID: f.Target, EventID: msg.ID.String(), Outcome: OutcomeOK}
	switch {
	case rollback && err == nil:
		q.Outcome = OutcomeRejected
	case err != nil:
		q.Outcome = OutcomeIndeterminate
	}
	h.record(q)
	return err
}

// injectPoison enqueues a message the broker refuses (too large) and
// records it as the poison expected to become a dead letter.
func (h *harness) injectPoison(ctx context.Context, f PlannedFault) error {
	msg := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "ChaosPoison", AggregateID: f.Target,
		EventType: "Poison", Topic: topicProbe,
		Payload: poisonPayload(h.seed, f.Target)}
	err := h.enqueue(ctx, msg, 0, false)
	q := Request{Kind: "poison", AggregateID: f.Target, EventID: msg.ID.String(), Outcome: OutcomeOK}
	if err != nil {
		q.Outcome = OutcomeIndeterminate
	}
	h.record(q)
	if err == nil {
		h.mu.Lock()
		h.poison = append(h.poison, msg.ID.String())
		h.mu.Unlock()
	}
	return err
}

// killAtFailpoint arms the running relay target at point, waits for it to
// reach the point (where it pauses), kills it there and restarts it. In
// cursor and CDC mode the leader publishes nearly everything, so the fault
// follows the lead instead: whichever relay leads is armed, and a relay
// armed earlier stays armed until one of them is killed. Arming a running
// process (no restart) leaves the lead where it is, so the fault cannot
// miss because a standby took the lead over while a restarted relay came up.
func (h *harness) killAtFailpoint(ctx context.Context, target *component, point string) error {
	hits := make(chan *component, len(h.relays)+1)
	done := make(chan struct{})
	defer close(done)
	var armed []*component
	aim := func(c *component) error {
		if c == nil || slices.Contains(armed, c) {
			return nil
		}
		p := c.current()
		if p == nil {
			return fmt.Errorf("%s is not running", c.name)
		}
		hit := p.watch("FAILPOINT " + point)
		if err := c.arm(point); err != nil {
			return err
		}
		armed = append(armed, c)
		go func() {
			select {
			case <-hit:
				hits <- c
			case <-done:
			}
		}()
		return nil
	}
	disarmAll := func() {
		for _, c := range armed {
			c.disarm()
		}
	}
	defer disarmAll()
	if l := h.component(h.leader(ctx)); l != nil {
		target = l
	}
	if err := aim(target); err != nil {
		return err
	}
	// settle disarms every armed relay and kills (and restarts) each that
	// reached the point: first, if not nil, and any that read its arming
	// just before the disarm and reaches the point within lateHitGrace.
	settle := func(first *component) (killed bool, err error) {
		disarmAll()
		late := time.After(lateHitGrace)
		for c := first; ; c = nil {
			if c == nil {
				select {
				case c = <-hits:
				case <-late:
					return killed, err
				}
			}
			killed = true
			c.kill()
			if e := c.start(restartWithin); err == nil {
				err = e
			}
		}
	}
	follow := time.NewTicker(followLeaderEvery)
	defer follow.Stop()
	timeout := time.After(failpointWait)
	for {
		select {
		case c := <-hits:
			_, err := settle(c)
			return err
		case <-follow.C:
			if h.cfg.Strategy != StrategyClaim {
				if err := aim(h.component(h.leader(ctx))); err != nil {
					h.logf("fault %s: cannot follow the lead: %v", point, err)
				}
			}
		case <-timeout:
			if killed, err := settle(nil); killed {
				return err
			}
			return fmt.Errorf("no message reached failpoint %s within %s (is the binary built with -tags failpoints?)", point, failpointWait)
		case <-ctx.Done():
			if killed, err := settle(nil); killed {
				return err
			}
			return ctx.Err()
		}
	}
}

// poisonPayload is a JSON payload of poisonPayloadBytes that the relay's
// compression cannot shrink under the broker's limit: base64 of random
// bytes (from the seed, so the same seed gives the same payload).
func poisonPayload(seed int64, name string) []byte {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(len(name))*31+uint64(name[len(name)-1])))
	raw := make([]byte, poisonPayloadBytes*3/4)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return []byte(`{"poison":"` + base64.StdEncoding.EncodeToString(raw) + `"}`)
}
