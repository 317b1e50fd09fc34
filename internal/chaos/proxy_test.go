package chaos

import (
	"errors"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// A toxiproxy operation that hangs marks its link stuck after the timeout;
// later operations on that link fail at once with errLinkStuck, and the
// other links still work.
func TestLinks_AHungOperationMarksTheLinkStuck(t *testing.T) {
	l := newLinks()
	defer l.close()
	l.timeout = 50 * time.Millisecond
	for _, name := range []string{"a", "b"} {
		if _, err := l.add(name, "127.0.0.1:0", "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
	}
	hang := make(chan struct{})
	defer close(hang)
	err := l.do("a", func(*toxiproxy.Proxy) error { <-hang; return nil })
	if !errors.Is(err, errLinkStuck) {
		t.Fatalf("a hung operation: %v, want errLinkStuck", err)
	}
	began := time.Now()
	if err := l.heal("a"); !errors.Is(err, errLinkStuck) || time.Since(began) > l.timeout {
		t.Errorf("heal of the stuck link: %v after %s, want errLinkStuck at once", err, time.Since(began))
	}
	if err := l.heal("b"); err != nil {
		t.Errorf("heal of another link: %v", err)
	}
}
