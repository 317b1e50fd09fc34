package consumer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// The environment of the crashing consumer process.
const (
	envCrashHelper  = "OUTBOX_TEST_CRASHING_CONSUMER"
	envCrashBrokers = "OUTBOX_TEST_BROKERS"
	envCrashSchema  = "OUTBOX_TEST_SCHEMA"
)

// A consumer that dies (SIGKILL) after the handler's transaction committed
// and before the record's offset was committed: the record is delivered
// again to the group's next member, which finds it a duplicate.
func TestRunner_CrashAfterDBCommitBeforeOffsetCommit_RedeliveryIsAbsorbed(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := event(0, "o-1", 1)
	e.produce(t, r)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess_CrashingConsumer$")
	cmd.Env = append(os.Environ(), envCrashHelper+"=1",
		envCrashBrokers+"="+strings.Join(e.broker.Addrs(), ","), envCrashSchema+"="+e.schema)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() ||
		exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("crashing consumer: %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	if n := e.effects(t, idOf(r)); n != 1 {
		t.Fatalf("%d effects after the crash, want 1 (the transaction committed)", n)
	}

	// The next member of the group starts from the last committed offset,
	// which is before the record.
	rec := newRecorder()
	e.start(t, consumer.Config{Group: "billing", Hooks: rec.hooks()})
	waitFor(t, "the record delivered again", func() bool { return rec.handled(0) == 1 })
	if got := rec.resultsOf(idOf(r)); !slices.Equal(got, []inbox.Result{inbox.Duplicate}) {
		t.Errorf("redelivery results %v, want [duplicate]", got)
	}
	if n := e.effects(t, idOf(r)); n != 1 {
		t.Errorf("%d effects after the redelivery, want 1", n)
	}
}

// crashedSessionTimeout is the session (and rebalance) timeout of the
// crashing consumer: the group waits this long for it before it gives its
// partition to the next member. The embedded broker's minimum is 6s.
const crashedSessionTimeout = 6 * time.Second

// TestHelperProcess_CrashingConsumer is the crashing consumer of the test
// above, run in a process of its own; it does nothing in a normal run.
func TestHelperProcess_CrashingConsumer(t *testing.T) {
	if os.Getenv(envCrashHelper) != "1" {
		return
	}
	schema := os.Getenv(envCrashSchema)
	pool := pgtest.Pool(t, schema)
	ib, err := inbox.New(pool, inbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{pool: pool, schema: schema, inbox: ib}
	r, err := consumer.New(consumer.Config{
		Brokers: strings.Split(os.Getenv(envCrashBrokers), ","), Group: "billing", Topics: []string{topic},
		Inbox: ib, Handler: e.apply,
		Hooks: consumer.Hooks{Handled: func(inbox.Message, inbox.Result, time.Duration) {
			// The transaction committed; the offset is not committed yet.
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}},
		ExtraOpts: []kgo.Opt{kgo.SessionTimeout(crashedSessionTimeout), kgo.RebalanceTimeout(crashedSessionTimeout)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.Run(ctx)
	t.Fatalf("Run returned %v; the process should have been killed in the Handled hook", err)
}
