package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// userHz is the unit of the times in /proc/stat: USER_HZ, 100 on every
// Linux architecture Go supports, whatever the kernel's own tick rate.
const userHz = 100

// cpuBusy returns the time the machine's CPUs together spent busy since
// boot: neither idle nor waiting for I/O nor stolen by a hypervisor
// (/proc/stat, first line), and false where /proc/stat cannot be read.
// Every process counts: PostgreSQL's backends, the bench's writers, relays
// and broker, and whatever else runs.
func cpuBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPUBusy(line)
}

// parseCPUBusy reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq, steal, ... in USER_HZ ticks. Busy is
// user+nice+system+irq+softirq (guest time is already part of user).
func parseCPUBusy(line string) (time.Duration, bool) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHz, true
}

// cpuUse is the machine's busy CPU time over some stretch of wall time in
// which a number of units of work (messages, transactions) were done.
type cpuUse struct {
	busy, wall time.Duration
	units      float64
	ok         bool
}

// measureCPU runs fn and returns the machine's CPU use meanwhile, with the
// units fn reports.
func measureCPU(fn func() (units float64, err error)) (cpuUse, error) {
	b0, ok0 := cpuBusy()
	t0 := time.Now()
	units, err := fn()
	wall := time.Since(t0)
	b1, ok1 := cpuBusy()
	return cpuUse{busy: b1 - b0, wall: wall, units: units, ok: ok0 && ok1}, err
}

// sumCPU adds stretches up; it is not measured if one of them was not.
func sumCPU(uses []cpuUse) cpuUse {
	sum := cpuUse{ok: len(uses) > 0}
	for _, u := range uses {
		sum.busy += u.busy
		sum.wall += u.wall
		sum.units += u.units
		sum.ok = sum.ok && u.ok
	}
	return sum
}

// microsPerUnit is the busy CPU time per unit of work in microseconds, or 0
// when it was not measured.
func (c cpuUse) microsPerUnit() float64 {
	if !c.ok || c.units <= 0 {
		return 0
	}
	return float64(c.busy.Microseconds()) / c.units
}

// busyPercent is the share of all CPUs' time that was busy, or 0 when it
// was not measured.
func (c cpuUse) busyPercent() float64 {
	if !c.ok || c.wall <= 0 {
		return 0
	}
	return 100 * c.busy.Seconds() / (c.wall.Seconds() * float64(runtime.NumCPU()))
}

// leastLoss is Report.RelayLeastLossPercent.
func leastLoss(rep Report) float64 {
	if rep.Drain == nil || rep.Steady == nil || rep.Settings.Mode != ModePolling {
		return 0
	}
	c, w := rep.Drain.CeilingCPUMicrosPerMessage, rep.Steady.WritersCPUMicrosPerTx
	if c <= 0 || w <= 0 {
		return 0
	}
	return 100 * c / (c + w)
}
