package consumer_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// A database outage is nobody's fault: failed attempts while the database
// does not answer are retried without being counted, so the message is not
// parked, and it is applied once the database is back.
func TestRunner_DatabaseOutage_DoesNotParkTheMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	proxy := newProxy(t)
	ib, err := inbox.New(proxy.pool(t, e.schema), inbox.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	r := event(0, "o-1", 1)
	e.produce(t, r)

	rec := newRecorder()
	e.start(t, fastRetries(consumer.Config{Group: "billing", Inbox: ib, MaxAttempts: 2, Hooks: rec.hooks()}))
	waitFor(t, "retries while the database is down", func() bool { return rec.retriedOf(idOf(r)) >= 5 })
	proxy.open(t)
	waitFor(t, "the message handled", func() bool { return rec.handled(inbox.Processed) == 1 })
	if n := rec.parkedCount(); n != 0 {
		t.Errorf("%d messages parked during the outage, want 0", n)
	}
	if n := e.effects(t, idOf(r)); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// proxy is a TCP port in front of the test database that refuses
// connections until it is opened.
type proxy struct {
	port   int
	target string
	mu     sync.Mutex
	ln     net.Listener
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	port, err := freeport.Port() // nothing listens there until open
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{port: port, target: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ln != nil {
			p.ln.Close()
		}
	})
	return p
}

// pool returns a pool on the test database through the proxy.
func (p *proxy) pool(t *testing.T, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(p.port)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// open starts accepting connections and passing them to the database.
func (p *proxy) open(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)))
	if err != nil {
		t.Fatalf("proxy: listen again on port %d: %v", p.port, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				db, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer db.Close()
				go io.Copy(db, c)
				io.Copy(c, db)
			}()
		}
	}()
}
