package chaos_test

import (
	"fmt"
	"time"

	"github.com/outbox-dev/outbox/internal/chaos"
)

// Check is a pure function over observations: here an event the client
// saw committed never reached the topic.
func ExampleCheck() {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	obs := chaos.Observations{
		Healed: at, Drained: at.Add(2 * time.Second),
		Outbox: []chaos.OutboxRow{
			{ID: "e1", AggregateType: "ChaosProbe", AggregateID: "hot-0", Topic: "chaos.probe", Status: "SENT", Seq: 1, CreatedAt: at},
			{ID: "e2", AggregateType: "ChaosProbe", AggregateID: "hot-0", EventType: "Probe", Topic: "chaos.probe", Status: "SENT", Seq: 2, CreatedAt: at},
		},
		Records: []chaos.TopicRecord{
			{Topic: "chaos.probe", Offset: 0, EventID: "e1", AggregateType: "ChaosProbe", AggregateID: "hot-0", Timestamp: at.Add(time.Millisecond)},
		},
	}
	v := chaos.Check(obs, chaos.Bounds{MaxCopies: 3, DrainBound: time.Minute})
	fmt.Println(v.Result(), v.Violated())
	fmt.Println(v.Violations[chaos.InvNoLost][0])
	// Output:
	// FAIL [no-lost-event]
	// outbox message e2 (Probe ChaosProbe/hot-0, status SENT) never reached topic chaos.probe
}
