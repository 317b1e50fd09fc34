package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"

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
}

// quietToxics silences the toxics' logging: some of them log to zerolog's
// global logger (at trace level, to stderr), which nothing else here uses.
var quietToxics sync.Once

func newLinks() *links {
	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() })
	return &links{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
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

func (l *links) get(name string) (*toxiproxy.Proxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.proxies[name]
	if !ok {
		return nil, fmt.Errorf("chaos: no proxy %q", name)
	}
	return p, nil
}

// toxic adds a toxic (toxiproxy's JSON form) to the link, in both directions
// when stream is "both".
func (l *links) toxic(name, typ, stream string, attrs string) error {
	p, err := l.get(name)
	if err != nil {
		return err
	}
	streams := []string{stream}
	if stream == "both" {
		streams = []string{"upstream", "downstream"}
	}
	for _, s := range streams {
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, typ+"_"+s, typ, s, attrs)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("chaos: toxic %s on %s: %w", typ, name, err)
		}
	}
	return nil
}

// cut closes every connection of the link and refuses new ones until
// restore.
func (l *links) cut(name string) error {
	p, err := l.get(name)
	if err != nil {
		return err
	}
	p.Stop()
	return nil
}

// heal removes the toxics of the link and starts it if it was cut.
func (l *links) heal(name string) error {
	p, err := l.get(name)
	if err != nil {
		return err
	}
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

func (l *links) close() {
	_ = l.server.Collection.Clear()
}
