package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker command listens, says where, accepts produce requests, and
// stops with exit status 0 when cancelled.
func TestBroker_ServesUntilCancelledAndPrintsItsAddress(t *testing.T) {
	t.Parallel()
	stdout, stderr, stop, done := startCLI(nil, "broker", "--listen", "127.0.0.1:0", "--partitions", "2")
	defer stop()
	stdout.WaitFor(t, "\n", 30*time.Second, done)
	line := strings.TrimSpace(stdout.String())
	const prefix = "broker listening on "
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("broker printed %q, want %q and the address", line, prefix)
	}
	addrs := strings.Split(strings.TrimPrefix(line, prefix), ",")
	if len(addrs) == 0 || strings.HasSuffix(addrs[0], ":0") {
		t.Fatalf("broker printed no usable address: %q", line)
	}

	client, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := client.ProduceSync(ctx, &kgo.Record{Topic: "smoke", Key: []byte("k"), Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to the broker at %s: %v; stderr:\n%s", addrs[0], err, stderr.String())
	}

	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("broker exited with %d after cancel, want 0; stderr:\n%s", code, stderr.String())
	}
}
