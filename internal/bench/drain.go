package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store"
)

// runDrain measures the database-only ceiling and the end-to-end drain
// with one relay and with cfg.Relays, each on a fresh backlog of
// cfg.Backlog messages.
func (r *runner) runDrain(ctx context.Context, rep *Report) error {
	w := r.cfg.Relay.Workers
	d := &DrainReport{Messages: r.cfg.Backlog, CeilingLoops: w, Relays: r.cfg.Relays, RelaysCeilingLoops: r.cfg.Relays * w}
	var err error
	var cpu cpuUse
	if d.CeilingPerSecond, cpu, err = r.drainCeiling(ctx, d.CeilingLoops); err != nil {
		return fmt.Errorf("database-only ceiling, %d loops: %w", d.CeilingLoops, err)
	}
	var failed int64
	if d.OneRelayPerSecond, failed, err = r.drainRelays(ctx, 1); err != nil {
		return fmt.Errorf("drain with one relay: %w", err)
	}
	d.FailedPublishes += failed
	if d.RelaysCeilingLoops == d.CeilingLoops {
		d.RelaysCeilingPerSecond = d.CeilingPerSecond
	} else if d.RelaysCeilingPerSecond, _, err = r.drainCeiling(ctx, d.RelaysCeilingLoops); err != nil {
		return fmt.Errorf("database-only ceiling, %d loops: %w", d.RelaysCeilingLoops, err)
	}
	if d.RelaysPerSecond, failed, err = r.drainRelays(ctx, r.cfg.Relays); err != nil {
		return fmt.Errorf("drain with %d relays: %w", r.cfg.Relays, err)
	}
	d.FailedPublishes += failed
	d.CeilingCPUMicrosPerMessage, d.CeilingCPUBusyPercent = cpu.microsPerUnit(), cpu.busyPercent()
	d.OneRelayRatio = ratio(d.OneRelayPerSecond, d.CeilingPerSecond)
	d.RelaysRatio = ratio(d.RelaysPerSecond, d.RelaysCeilingPerSecond)
	rep.Drain = d
	return nil
}

// drainCeiling drains a backlog with the store's own Claim and MarkSent (or
// MarkSentAndClaim) in concurrent loops of Relay.BatchSize, publishing nothing: the relay's SQL
// with the broker taken out. It returns messages per second, and the
// machine's CPU use while the loops ran.
func (r *runner) drainCeiling(ctx context.Context, loops int) (float64, cpuUse, error) {
	batch := r.cfg.Relay.BatchSize
	s, err := r.newScenario(ctx, fmt.Sprintf("ceiling%d", loops), int32(loops+1))
	if err != nil {
		return 0, cpuUse{}, err
	}
	defer s.close()
	label := fmt.Sprintf("ceiling, %d loops", loops)
	if err := s.loadBacklog(ctx, r.cfg.Backlog, r.cfg.Aggregates, label); err != nil {
		return 0, cpuUse{}, err
	}
	if err := s.analyze(ctx); err != nil {
		return 0, cpuUse{}, err
	}
	want := int64(r.cfg.Backlog)
	q := r.relayQueue(s.store)
	var marked atomic.Int64
	loopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		loopErr error
	)
	cpu, err := measureCPU(func() (float64, error) {
		start := time.Now()
		for range loops {
			wg.Go(func() {
				if err := r.claimMarkLoop(loopCtx, q, batch, &marked, want); err != nil && loopCtx.Err() == nil {
					errOnce.Do(func() { loopErr = err })
					cancel()
				}
			})
		}
		return float64(want), r.await(loopCtx, label, marked.Load, want, start)
	})
	cancel()
	wg.Wait()
	if loopErr != nil {
		return 0, cpuUse{}, loopErr
	}
	if err != nil {
		return 0, cpuUse{}, err
	}
	// As a relay does when it stops: in cursor mode the cursor strategy
	// saves its position and resigns (in claim mode nothing happens).
	if err := resign(ctx, q); err != nil {
		return 0, cpuUse{}, err
	}
	if err := s.checkAllSent(ctx, want); err != nil {
		return 0, cpuUse{}, err
	}
	return float64(want) / cpu.wall.Seconds(), cpu, nil
}

// claimMarkLoop is the relay's claim-publish-mark loop with a publish that
// does nothing: claim a batch, mark it sent, until want are marked. With a
// store.MarkClaimer it marks and claims the next batch in one call, as the
// relay does, so that the ceiling runs the relay's SQL in the relay's round
// trips.
func (r *runner) claimMarkLoop(ctx context.Context, q store.Queue, batch int, marked *atomic.Int64, want int64) error {
	p := store.ClaimParams{Owner: "bench-ceiling", Limit: batch, Lease: r.cfg.Relay.Lease}
	seqs := make([]int64, 0, batch)
	mc, combined := q.(store.MarkClaimer)
	var next *store.Claim
	for marked.Load() < want {
		var c store.Claim
		if next != nil {
			c, next = *next, nil
		} else {
			var err error
			if c, err = q.Claim(ctx, p); err != nil {
				return err
			}
		}
		if len(c.Records) == 0 {
			// The rest is in flight with another loop.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
			continue
		}
		seqs = seqs[:0]
		for _, rec := range c.Records {
			seqs = append(seqs, rec.Seq)
		}
		if combined {
			n, nc, err := mc.MarkSentAndClaim(ctx, c.Token, seqs, p)
			if err != nil {
				return err
			}
			marked.Add(n)
			next = &nc
			continue
		}
		n, err := q.MarkSent(ctx, c.Token, seqs)
		if err != nil {
			return err
		}
		marked.Add(n)
	}
	return nil
}

// drainRelays drains a backlog with n in-process relays, each with its own
// pool and Kafka client, and returns messages per second (from the start of
// the relays to the last message marked SENT) and the failed publishes.
func (r *runner) drainRelays(ctx context.Context, n int) (float64, int64, error) {
	tag := fmt.Sprintf("drain%d", n)
	s, err := r.newScenario(ctx, tag, 2)
	if err != nil {
		return 0, 0, err
	}
	defer s.close()
	label := fmt.Sprintf("%d relay(s)", n)
	if err := s.loadBacklog(ctx, r.cfg.Backlog, r.cfg.Aggregates, label); err != nil {
		return 0, 0, err
	}
	if err := s.analyze(ctx); err != nil {
		return 0, 0, err
	}
	var published, failed atomic.Int64
	hooks := relay.Hooks{
		Published: func(outbox.Record, time.Duration) { published.Add(1) },
		Failed:    func(outbox.Record, error, bool) { failed.Add(1) },
	}
	want := int64(r.cfg.Backlog)
	start := time.Now()
	var runs []*relayRun
	defer func() { stopAll(runs) }()
	for i := range n {
		rr, err := r.startRelay(ctx, s, fmt.Sprintf("bench-%s-%d", tag, i+1), nil, hooks, nil)
		if err != nil {
			return 0, 0, err
		}
		runs = append(runs, rr)
	}
	err = r.await(ctx, label+" to Kafka", published.Load, want, start)
	elapsed := time.Since(start)
	if errors.Is(err, errStalled) && failed.Load() > 0 {
		err = fmt.Errorf("%w (%d publishes failed)", err, failed.Load())
	}
	if err != nil {
		return 0, 0, err
	}
	if err := s.checkAllSent(ctx, want); err != nil {
		return 0, 0, err
	}
	return float64(want) / elapsed.Seconds(), failed.Load(), nil
}
