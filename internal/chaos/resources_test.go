package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// The flat rule: the last value against FlatFactor times the median of the
// first half plus the slack; fewer than two values are not judged.
func TestFlat_LastAgainstTheMedianOfTheFirstHalf(t *testing.T) {
	for _, c := range []struct {
		values []int64
		slack  int64
		ok     bool
		base   int64
	}{
		{nil, 0, true, 0},
		{[]int64{500}, 0, true, 0},
		{[]int64{10, 15}, 0, true, 10},
		{[]int64{10, 16}, 0, false, 10},
		{[]int64{10, 16}, 1, true, 10},
		{[]int64{40, 10, 90, 20, 37}, 0, true, 25},       // first half 40, 10: median 25, limit 37
		{[]int64{40, 10, 90, 20, 38}, 0, false, 25},      // over 37
		{[]int64{10, 1000, 12, 14, 16, 15}, 0, true, 12}, // a spike early does not raise the median
		{[]int64{10, 11, 12, 14, 16, 40}, 20, false, 11}, // limit 16 + 20
	} {
		ok, base, limit := flat(c.values, c.slack)
		if ok != c.ok || base != c.base {
			t.Errorf("flat(%v, slack %d) = %v, base %d, limit %d; want %v, base %d", c.values, c.slack, ok, base, limit, c.ok, c.base)
		}
	}
}

// The stall after a pause is the time from its start to the first record
// produced after it, on any topic; a pause with no record after it has -1.
func TestPauseStalls_FromThePauseToTheNextRecord(t *testing.T) {
	obs := Observations{
		Started: t0,
		Faults: []FaultWindow{
			{Kind: FaultRelayZombie, Target: "relay-2", Start: t0.Add(20 * time.Second), End: t0.Add(26 * time.Second)},
			{Kind: FaultRelayKill, Target: "relay-1", Start: t0.Add(5 * time.Second), End: t0.Add(6 * time.Second)},
			{Kind: FaultRelayZombie, Target: "relay-1", Start: t0.Add(10 * time.Second), End: t0.Add(15 * time.Second)},
			{Kind: FaultRelayZombie, Target: "relay-3", Start: t0.Add(40 * time.Second), End: t0.Add(45 * time.Second)},
		},
		Records: []TopicRecord{
			{Topic: "orders", Timestamp: t0.Add(25 * time.Second)},
			{Topic: "chaos.probe", Timestamp: t0.Add(9 * time.Second)},
			{Topic: "chaos.probe", Timestamp: t0.Add(10*time.Second + 300*time.Millisecond)},
			{Topic: "orders", Timestamp: t0.Add(12 * time.Second)},
		},
	}
	got := pauseStalls(obs)
	want := []PauseStall{
		{Relay: "relay-1", At: 10 * time.Second, Pause: 5 * time.Second, Stall: 300 * time.Millisecond},
		{Relay: "relay-2", At: 20 * time.Second, Pause: 6 * time.Second, Stall: 5 * time.Second},
		{Relay: "relay-3", At: 40 * time.Second, Pause: 5 * time.Second, Stall: -1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stalls %+v; want %+v", got, want)
	}
	v := Verdict{Stalls: got}
	if v.LongestStall() != 5*time.Second {
		t.Errorf("longest stall %s; want 5s", v.LongestStall())
	}
}

// Runs without --strategy take turns: the seed picks claim, cursor and cdc
// in that order (negative seeds too).
func TestStrategyForSeed_EveryStrategyInTurn(t *testing.T) {
	for seed, want := range map[int64]string{0: StrategyClaim, 1: StrategyCursor, 2: StrategyCDC, 3: StrategyClaim,
		20261130: StrategyClaim, -1: StrategyCDC, -3: StrategyClaim} {
		if got := StrategyForSeed(seed); got != want {
			t.Errorf("StrategyForSeed(%d) = %s; want %s", seed, got, want)
		}
	}
	if err := (Config{Strategy: "polling"}).withDefaults().validate(); err == nil || !strings.Contains(err.Error(), "Strategy") {
		t.Errorf("strategy polling: %v; want an error naming Strategy", err)
	}
}

// In CDC mode the plan kills the leader after the broker's ack (the
// stream runs on the relay core, which has that failpoint) and at random
// moments, never inside a mark; where a relay leads, the pauses aim at
// it. Claim mode's plan: failpoint faults and pauses of named relays.
func TestPlanFaults_PerStrategy(t *testing.T) {
	kinds := func(strategy string) (map[string]int, map[string]bool) {
		cfg := Config{Strategy: strategy, Duration: 10 * time.Minute}.withDefaults()
		n, zombieTargets := map[string]int{}, map[string]bool{}
		for _, f := range planFaults(11, cfg) {
			n[f.Kind]++
			if f.Kind == FaultRelayZombie || f.Kind == FaultLeaderKill || (strategy == StrategyCDC && f.Kind == FaultRelayAfterAck) {
				zombieTargets[f.Target] = true
			}
		}
		return n, zombieTargets
	}
	cdc, cdcTargets := kinds(StrategyCDC)
	if cdc[FaultRelayInMark] != 0 || cdc[FaultRelayAfterAck] == 0 || cdc[FaultLeaderKill] == 0 || cdc[FaultRelayZombie] == 0 {
		t.Errorf("CDC plan: %v; want kills after the ack, leader kills and pauses, no kill in a mark", cdc)
	}
	if len(cdcTargets) != 1 || !cdcTargets[targetLeader] {
		t.Errorf("CDC plan aims its pauses and kills at %v; want the leader only", cdcTargets)
	}
	if _, targets := kinds(StrategyCursor); len(targets) != 1 || !targets[targetLeader] {
		t.Errorf("cursor plan aims its pauses at %v; want the leader only", targets)
	}
	claim, claimTargets := kinds(StrategyClaim)
	if claim[FaultLeaderKill] != 0 || claim[FaultRelayAfterAck] == 0 || claim[FaultRelayInMark] == 0 || claimTargets[targetLeader] {
		t.Errorf("claim plan: %v, pauses of %v; want failpoint faults and pauses of named relays, no leader", claim, claimTargets)
	}
}

// The JSON report names the strategy and carries the samples and stalls.
func TestReport_JSON_NamesTheStrategyWithSamplesAndStalls(t *testing.T) {
	obs, b := healthy()
	v := Check(obs, b)
	v.Stalls = []PauseStall{{Relay: "relay-2", At: 20 * time.Second, Pause: 6 * time.Second, Stall: 5 * time.Second}}
	rep := Report{Verdict: v, Seed: 5, Strategy: StrategyCDC, SampleEvery: time.Minute, Resources: obs.Resources}
	data, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Strategy  string `json:"strategy"`
		Resources []struct {
			Relay   string           `json:"relay"`
			Samples []map[string]any `json:"samples"`
		} `json:"resources"`
		PauseStalls    []map[string]any `json:"pauseStalls"`
		LongestStallMs int64            `json:"longestStallMs"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Strategy != StrategyCDC || len(got.Resources) != 1 || len(got.Resources[0].Samples) != 4 ||
		got.Resources[0].Samples[1]["goroutines"] != 45.0 || got.Resources[0].Samples[1]["atMs"] != 60000.0 ||
		len(got.PauseStalls) != 1 || got.PauseStalls[0]["stallMs"] != 5000.0 || got.LongestStallMs != 5000 {
		t.Errorf("report JSON:\n%s", data)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, want := range []string{"strategy         cdc", "relay resources", "relay-1", "40.0 MiB", "longest 5s; relay-2 at 20s for 6s: 5s"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}
