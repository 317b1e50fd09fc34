package condlog

import (
	"testing"
	"time"
)

func TestCondition_LogsBeginThenAtMostEveryIntervalThenEndOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Condition{Every: 30 * time.Second}
	if _, ended := c.Ended(t0); ended {
		t.Fatal("Ended before the condition ever held reports an end")
	}
	var logged []time.Duration
	for s := 0; s <= 65; s += 5 { // a retry every 5s for 65s
		if c.Holds(t0.Add(time.Duration(s) * time.Second)) {
			logged = append(logged, time.Duration(s)*time.Second)
		}
	}
	want := []time.Duration{0, 30 * time.Second, 60 * time.Second}
	if len(logged) != len(want) {
		t.Fatalf("logged at %v, want %v", logged, want)
	}
	for i := range want {
		if logged[i] != want[i] {
			t.Fatalf("logged at %v, want %v", logged, want)
		}
	}
	lasted, ended := c.Ended(t0.Add(70 * time.Second))
	if !ended || lasted != 70*time.Second {
		t.Fatalf("Ended = %v, %v; want 70s, true", lasted, ended)
	}
	if _, ended := c.Ended(t0.Add(71 * time.Second)); ended {
		t.Fatal("a second Ended reports the end again")
	}
	if !c.Holds(t0.Add(72 * time.Second)) {
		t.Fatal("the condition beginning again is not logged")
	}
}
