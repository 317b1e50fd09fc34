package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runClients is the pool of producer clients that PublishRuns uses. Each
// client is configured like the sink's shared one, but flushes only when told
// to (kgo.ManualFlushing), and it serves one call at a time: a call takes an
// idle client, hands it its records, flushes it, and gives it back. A client
// whose call ended before its records had an outcome goes to a drainer,
// which flushes it until it is empty and then gives it back; no call hands
// it records meanwhile. At most max clients are open; a call waits while all
// are busy.
type runClients struct {
	newClient func() (*kgo.Client, error)
	max       int

	mu       sync.Mutex
	idle     []*kgo.Client // longest idle first
	open     map[*kgo.Client]bool
	draining int
	// freed is closed, and replaced, when a client becomes idle or a
	// client's place becomes free.
	freed  chan struct{}
	closed bool

	// drainCtx bounds the drainers' flushes; it ends at close.
	drainCtx  context.Context
	endDrains context.CancelFunc
	drainers  sync.WaitGroup
}

func newRunClients(max int, newClient func() (*kgo.Client, error)) *runClients {
	ctx, cancel := context.WithCancel(context.Background())
	return &runClients{newClient: newClient, max: max, open: make(map[*kgo.Client]bool),
		freed: make(chan struct{}), drainCtx: ctx, endDrains: cancel}
}

// take returns a client for the caller alone, holding no buffered record: the
// one idle the longest, or a new one while fewer than max are open. It waits
// for one until ctx ends. After close it returns kgo.ErrClientClosed.
func (p *runClients) take(ctx context.Context) (*kgo.Client, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, kgo.ErrClientClosed
		}
		if len(p.idle) > 0 {
			cl := p.idle[0]
			p.idle = p.idle[1:]
			p.mu.Unlock()
			return cl, nil
		}
		if len(p.open) < p.max {
			// kgo.NewClient does not connect, so creating it under the lock
			// keeps the count exact without making others wait on I/O.
			cl, err := p.newClient()
			if err == nil {
				p.open[cl] = true
			}
			p.mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("new producer client: %w", err)
			}
			return cl, nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put gives back cl, which holds no buffered record.
func (p *runClients) put(cl *kgo.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return // close closed it
	}
	p.idle = append(p.idle, cl)
	p.signal()
}

// retire closes cl, which holds no buffered record, instead of giving it
// back, and frees its place for a new client. A client is retired after a
// flush in which a record failed: its sink may still be in a drain loop
// (backing off after the failure) that would send the next call's records
// before that call's flush; a closed client's loop ends.
func (p *runClients) retire(cl *kgo.Client) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return // close closed it
	}
	delete(p.open, cl)
	p.signal()
	p.mu.Unlock()
	cl.Close()
}

// drain flushes cl, whose call ended while it still held records, until it
// holds none, and then retires it (see retire: its records met an outage or
// a slow broker, after which its sink may still be backing off). The records
// get their outcomes through their promises as usual.
func (p *runClients) drain(cl *kgo.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return // close closed it, which failed its records
	}
	p.draining++
	p.drainers.Add(1)
	go func() {
		defer p.drainers.Done()
		err := cl.Flush(p.drainCtx)
		p.mu.Lock()
		p.draining--
		p.mu.Unlock()
		if err == nil {
			p.retire(cl)
		}
	}()
}

// signal wakes the takers waiting for a client; p.mu is held.
func (p *runClients) signal() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// counts returns how many clients are idle, draining, and open.
func (p *runClients) counts() (idle, draining, open int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), p.draining, len(p.open)
}

// close closes every client, which fails the records they still hold, and
// waits for the drainers to return. Later takes fail.
func (p *runClients) close() {
	p.mu.Lock()
	p.closed = true
	clients := make([]*kgo.Client, 0, len(p.open))
	for cl := range p.open {
		clients = append(clients, cl)
	}
	p.idle = nil
	p.signal()
	p.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	p.endDrains()
	p.drainers.Wait()
}
