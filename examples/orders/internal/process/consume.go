package process

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// Consume runs the consumer group of cfg until ctx ends, and logs what it
// handled every statsInterval (when it changed) and at the end: a line
// "events handled" with the group and the counts processed, duplicates,
// parked and retried. It sets cfg.Hooks; an error of consumer.New is
// returned as it is, so that a caller can tell which field it names.
func Consume(ctx context.Context, cfg consumer.Config, statsInterval time.Duration, log *slog.Logger) error {
	var stats handledStats
	cfg.Hooks = stats.hooks()
	r, err := consumer.New(cfg)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(statsInterval)
		defer t.Stop()
		var last handledCounts
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if now := stats.counts(); now != last {
					logHandled(log, cfg.Group, now)
					last = now
				}
			}
		}
	}()
	err = r.Run(ctx)
	<-done
	logHandled(log, cfg.Group, stats.counts())
	if err != nil {
		return fmt.Errorf("consumer group %s: %w", cfg.Group, err)
	}
	return nil
}

// handledStats counts what a consumer did, from its hooks.
type handledStats struct{ processed, duplicates, parked, retried atomic.Int64 }

type handledCounts struct{ processed, duplicates, parked, retried int64 }

func (s *handledStats) hooks() consumer.Hooks {
	return consumer.Hooks{
		Handled: func(_ inbox.Message, res inbox.Result, _ time.Duration) {
			if res == inbox.Duplicate {
				s.duplicates.Add(1)
			} else {
				s.processed.Add(1)
			}
		},
		Parked:  func(inbox.Message, error) { s.parked.Add(1) },
		Retried: func(inbox.Message, error) { s.retried.Add(1) },
	}
}

func (s *handledStats) counts() handledCounts {
	return handledCounts{s.processed.Load(), s.duplicates.Load(), s.parked.Load(), s.retried.Load()}
}

func logHandled(log *slog.Logger, group string, c handledCounts) {
	log.Info("events handled", slog.String("group", group), slog.Int64("processed", c.processed),
		slog.Int64("duplicates", c.duplicates), slog.Int64("parked", c.parked), slog.Int64("retried", c.retried))
}
