package bench

import (
	"math"
	"runtime"
	"testing"
	"time"
)

func TestParseCPUBusy_CountsBusyTicksOnly(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	c, ok := parseCPUBusy("cpu  205116 7 95485 256134 18526 3 10346 999 50 0")
	if !ok {
		t.Fatal("a valid line was not read")
	}
	want := time.Duration(205116+7+95485+3+10346) * 10 * time.Millisecond
	if c.busy != want {
		t.Errorf("busy %v, want %v (user, nice, system, irq and softirq; not idle, iowait or steal)", c.busy, want)
	}
	if total := want + time.Duration(256134+18526+999)*10*time.Millisecond; c.total != total {
		t.Errorf("total %v, want %v (busy, idle, iowait and steal; guest is part of user)", c.total, total)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7", "cpu 1 2 3", "cpu 1 x 3 4 5 6 7 8"} {
		if _, ok := parseCPUBusy(bad); ok {
			t.Errorf("%q read as a cpu line", bad)
		}
	}
}

// The least loss is c/(c+w): with the relay's c µs per message added to each
// transaction's w µs, CPU-bound writers commit w/(c+w) as many.
func TestLeastLoss_IsTheRelaysShareOfEachTransactionsCPU(t *testing.T) {
	rep := Report{
		Settings: Settings{Mode: ModePolling},
		Drain:    &DrainReport{CeilingCPUMicrosPerMessage: 100},
		Steady:   &SteadyReport{WritersCPUMicrosPerTx: 900},
	}
	if got := leastLoss(rep); math.Abs(got-10) > 1e-9 {
		t.Errorf("least loss %v%%, want 10%%", got)
	}
	cdc := rep
	cdc.Settings.Mode = ModeCDC
	noDrain := rep
	noDrain.Drain = nil
	unmeasured := rep
	unmeasured.Steady = &SteadyReport{}
	for name, r := range map[string]Report{"cdc": cdc, "no drain": noDrain, "unmeasured": unmeasured} {
		if got := leastLoss(r); got != 0 {
			t.Errorf("%s: least loss %v, want 0 (not comparable)", name, got)
		}
	}
}

func TestMeasureCPU_CountsBusyTimeOfTheMachine(t *testing.T) {
	use, err := measureCPU(func() (float64, error) {
		end := time.Now().Add(300 * time.Millisecond)
		n := 0
		for time.Now().Before(end) {
			n++
		}
		return float64(n), nil
	})
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	if err != nil || !use.ok {
		t.Fatalf("CPU use not measured: %v, %+v", err, use)
	}
	// A busy loop of 300 ms keeps one CPU busy: at least 200 ms counted
	// (ticks of 10 ms, and the loop may be scheduled out), and the share
	// of all CPUs at most 100%.
	if use.busy < 200*time.Millisecond || use.busyPercent() <= 0 || use.busyPercent() > 100 {
		t.Errorf("busy %v of %v (%.0f%% of the CPUs); want at least 200 ms", use.busy, use.total, use.busyPercent())
	}
	if use.microsPerUnit() <= 0 {
		t.Errorf("µs per unit %v", use.microsPerUnit())
	}
}
