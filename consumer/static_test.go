package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// envStaticHelper runs TestHelperProcess_StaticMember; the brokers and the
// schema come in envCrashBrokers and envCrashSchema.
const envStaticHelper = "OUTBOX_TEST_STATIC_MEMBER"

// The static member's settings. The session and rebalance timeouts are
// long, so that a group that waits for the killed member cannot pass the
// test: a dynamic member would get the partitions only after 30 s.
const (
	staticGroup      = "static"
	staticInstanceID = "static-1"
	staticPartitions = 3
	staticTimeout    = 30 * time.Second
	staticRecovery   = 10 * time.Second
)

// A static member (Config.InstanceID) that holds every partition is killed
// (SIGKILL: no LeaveGroup). Its successor with the same instance id takes
// the partitions over at once instead of waiting for the dead member's
// session to time out.
func TestRunner_StaticMemberKilled_RestartWithSameInstanceIDResumesAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, staticPartitions)
	for p := range int32(staticPartitions) {
		e.produce(t, event(p, fmt.Sprintf("o-%d", p), 1))
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess_StaticMember$")
	cmd.Env = append(os.Environ(), envStaticHelper+"=1",
		envCrashBrokers+"="+strings.Join(e.broker.Addrs(), ","), envCrashSchema+"="+e.schema)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() ||
		exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("static member: %v, want killed by SIGKILL; output:\n%s", err, out)
	}

	// The dead member still holds every partition. Its successor gets them
	// back without waiting for its session (30 s) to time out.
	started := time.Now()
	rec := newRecorder()
	e.start(t, consumer.Config{Group: staticGroup, InstanceID: staticInstanceID,
		SessionTimeout: staticTimeout, RebalanceTimeout: staticTimeout, Hooks: rec.hooks()})
	var fresh []uuid.UUID
	for p := range int32(staticPartitions) {
		r := event(p, fmt.Sprintf("o-%d", p), 2)
		e.produce(t, r)
		fresh = append(fresh, idOf(r))
	}
	deadline := started.Add(staticRecovery)
	for _, id := range fresh {
		for len(rec.resultsOf(id)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the restarted member handled %d of the %d new records (one per partition) within %s; want all: it should take over every partition of the killed member at once",
					countHandled(rec, fresh), len(fresh), staticRecovery)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("all partitions handled again %s after the restart", time.Since(started).Round(time.Millisecond))
	for _, id := range fresh {
		if n := e.effects(t, id); n != 1 {
			t.Errorf("record %s: %d effects, want 1", id, n)
		}
	}
}

// countHandled counts the messages of ids that rec saw handled.
func countHandled(rec *recorder, ids []uuid.UUID) int {
	n := 0
	for _, id := range ids {
		if len(rec.resultsOf(id)) > 0 {
			n++
		}
	}
	return n
}

// TestHelperProcess_StaticMember is the static member of the test above,
// run in a process of its own; it does nothing in a normal run. It kills
// itself once it has handled a record of every partition, which shows that
// it held them all.
func TestHelperProcess_StaticMember(t *testing.T) {
	if os.Getenv(envStaticHelper) != "1" {
		return
	}
	schema := os.Getenv(envCrashSchema)
	pool := pgtest.Pool(t, schema)
	ib, err := inbox.New(pool, inbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{pool: pool, schema: schema, inbox: ib}
	var (
		mu   sync.Mutex
		seen = map[int32]bool{}
	)
	r, err := consumer.New(consumer.Config{
		Brokers: strings.Split(os.Getenv(envCrashBrokers), ","), Group: staticGroup, Topics: []string{topic},
		Inbox: ib, Handler: e.apply, InstanceID: staticInstanceID,
		SessionTimeout: staticTimeout, RebalanceTimeout: staticTimeout,
		Hooks: consumer.Hooks{Handled: func(m inbox.Message, _ inbox.Result, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			seen[m.Partition] = true
			if len(seen) == staticPartitions {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.Run(ctx)
	t.Fatalf("Run returned %v; the process should have been killed in the Handled hook", err)
}
