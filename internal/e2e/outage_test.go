package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/freeport"
)

// A relay that waits for its database at start stops at once on SIGTERM,
// with status 0: an orchestrator stopping it during an outage need not
// wait for its backoff.
func TestRelay_SIGTERMWhileWaitingForTheDatabase_ExitsZeroPromptly(t *testing.T) {
	t.Parallel()
	port, err := freeport.Port() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, []string{fmt.Sprintf("OUTBOX_DATABASE_URL=postgres://postgres@127.0.0.1:%d/test", port),
		"OUTBOX_KAFKA_BROKERS=127.0.0.1:1"}, "relay")
	// After the third failed attempt the relay waits 2 to 4 s for the next.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(p.output(), "database not reachable") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no third attempt within 30s:\n%s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := p.stop(1500 * time.Millisecond); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.output())
	}
}
