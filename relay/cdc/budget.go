package cdc

import (
	"sync"

	"github.com/outbox-dev/outbox"
)

// budget bounds the bytes of the messages a session holds in memory
// (Config.MaxInFlightBytes): the reader takes a message's share as soon as
// it has decoded it, before handing it on, and the share is given back when
// the confirmed position passed the message. So the bound covers every
// place a decoded message waits: the channel to the feeder, the batch being
// filled, the check, the ledger, the publish and the record.
type budget struct {
	max   int64
	mu    sync.Mutex
	used  int64
	freed chan struct{} // a token when bytes were given back
}

func newBudget(max int64) *budget {
	return &budget{max: max, freed: make(chan struct{}, 1)}
}

// take reserves n bytes and reports true if they fit under the bound, or if
// nothing is reserved: a message larger than the bound goes alone.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes and wakes a waiting take.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// inUse returns the bytes reserved.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// recordBytes estimates the memory a decoded message takes: its payload,
// text fields and headers, and a fixed share for the rest.
func recordBytes(rec outbox.Record) int64 {
	n := len(rec.Payload) + len(rec.AggregateType) + len(rec.AggregateID) + len(rec.EventType) +
		len(rec.Topic) + len(rec.ContentType) + len(rec.CorrelationID) + len(rec.CausationID) +
		len(rec.TraceParent) + 256
	for k, v := range rec.Headers {
		n += len(k) + len(v)
	}
	return int64(n)
}
