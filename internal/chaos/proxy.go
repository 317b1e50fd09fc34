package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// links are the toxiproxy proxies in front of PostgreSQL (one per
// component) and the broker (one, since every client reconnects to the one
// address the broker advertises).
type links struct {
	server  *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy
	stuck   map[string]bool // links on which toxiproxy hung (see linkOpTimeout)
	timeout time.Duration   // linkOpTimeout
}

// linkOpTimeout bounds one toxiproxy operation on a link. toxiproxy can hang
// for good removing a toxic from a link whose destination connection died
// while a chunk waited to be written to it (its issues 427 and 558): the
// remove waits for a goroutine blocked on a channel nobody reads, holding
// the link's lock. Such a link is marked stuck: it keeps its toxics (the
// traffic still flows through it) and takes no more faults, and the run
// goes on.
const linkOpTimeout = 15 * time.Second

// errLinkStuck is the error of an operation on a stuck link.
var errLinkStuck = errors.New("toxiproxy hung on this link (its known deadlock removing a toxic); the link keeps its toxics and takes no more faults")

// quietToxics silences the toxics' logging: some of them log to zerolog's
// global logger (at trace level, to stderr), which nothing else here uses.
var quietToxics sync.Once

func newLinks() *links {
	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() })
	return &links{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
		stuck:   map[string]bool{},
		timeout: linkOpTimeout,
	}
}

// add starts a proxy from listen to upstream and returns its address.
func (l *links) add(name, listen, upstream string) (string, error) {
	p := toxiproxy.NewProxy(l.server, name, listen, upstream)
	if err := l.server.Collection.Add(p, true); err != nil {
		return "", fmt.Errorf("chaos: proxy %s (%s -> %s): %w", name, listen, upstream, err)
	}
	l.mu.Lock()
	l.proxies[name] = p
	l.mu.Unlock()
	return p.Listen, nil
}

// do runs fn on the link name, for at most linkOpTimeout; a link on which
// it takes longer is stuck from then on, and fn is not run on a stuck one.
func (l *links) do(name string, fn func(p *toxiproxy.Proxy) error) error {
	l.mu.Lock()
	p, ok := l.proxies[name]
	stuck := l.stuck[name]
	l.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("chaos: no proxy %q", name)
	case stuck:
		return fmt.Errorf("chaos: link %s: %w", name, errLinkStuck)
	}
	done := make(chan error, 1)
	go func() { done <- fn(p) }()
	select {
	case err := <-done:
		return err
	case <-time.After(l.timeout):
		l.mu.Lock()
		l.stuck[name] = true
		l.mu.Unlock()
		return fmt.Errorf("chaos: link %s: no answer from toxiproxy within %s: %w", name, l.timeout, errLinkStuck)
	}
}

// toxic adds a toxic (toxiproxy's JSON form) to the link, in both directions
// when stream is "both".
func (l *links) toxic(name, typ, stream string, attrs string) error {
	streams := []string{stream}
	if stream == "both" {
		streams = []string{"upstream", "downstream"}
	}
	return l.do(name, func(p *toxiproxy.Proxy) error {
		for _, s := range streams {
			js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, typ+"_"+s, typ, s, attrs)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return fmt.Errorf("chaos: toxic %s on %s: %w", typ, name, err)
			}
		}
		return nil
	})
}

// cut closes every connection of the link and refuses new ones until
// restore.
func (l *links) cut(name string) error {
	return l.do(name, func(p *toxiproxy.Proxy) error {
		p.Stop()
		return nil
	})
}

// heal removes the toxics of the link and starts it if it was cut.
func (l *links) heal(name string) error {
	return l.do(name, func(p *toxiproxy.Proxy) error {
		nop := zerolog.Nop()
		p.Toxics.ResetToxics(nop.WithContext(context.Background())) // toxics log to the context's logger
		p.Lock()
		enabled := p.Enabled
		p.Unlock()
		if !enabled {
			if err := p.Start(); err != nil {
				return fmt.Errorf("chaos: restore link %s: %w", name, err)
			}
		}
		return nil
	})
}

func (l *links) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.proxies {
		out = append(out, n)
	}
	return out
}

// close stops every link, giving up after linkOpTimeout when toxiproxy
// hangs on a stuck one.
func (l *links) close() {
	done := make(chan struct{})
	go func() { _ = l.server.Collection.Clear(); close(done) }()
	select {
	case <-done:
	case <-time.After(l.timeout):
	}
}
