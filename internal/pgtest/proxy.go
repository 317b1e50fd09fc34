package pgtest

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/freeport"
)

// Proxy is a TCP port in front of the test database that refuses
// connections until it is opened: a database that is away, then back.
type Proxy struct {
	port   int
	target string
	mu     sync.Mutex
	ln     net.Listener
}

// NewProxy returns a closed proxy; it stops when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	port, err := freeport.Port() // nothing listens there until Open
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{port: port, target: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ln != nil {
			p.ln.Close()
		}
	})
	return p
}

// URL is the test database's URL through the proxy.
func (p *Proxy) URL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", URL(), err)
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	return u.String()
}

// Pool returns a pool on the test database through the proxy, with
// search_path set to schema. It connects lazily, so it can be made while
// the proxy is closed.
func (p *Proxy) Pool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	countPool(t)
	cfg, err := pgxpool.ParseConfig(p.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Open starts accepting connections and passing them to the database.
func (p *Proxy) Open(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)))
	if err != nil {
		t.Fatalf("pgtest: proxy: listen on port %d: %v", p.port, err)
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
			go p.forward(c)
		}
	}()
}

// forward copies between c and a new connection to the database.
func (p *Proxy) forward(c net.Conn) {
	defer c.Close()
	db, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer db.Close()
	go func() { _, _ = io.Copy(db, c) }()
	_, _ = io.Copy(c, db)
}
