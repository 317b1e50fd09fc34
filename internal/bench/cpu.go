package bench

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// userHz is the unit of the times in /proc/stat: USER_HZ, 100 on every
// Linux architecture Go supports, whatever the kernel's own tick rate.
const userHz = 100

// cpuTimes is the time the machine's CPUs together spent since boot:
// busy (neither idle nor waiting for I/O nor stolen by a hypervisor) and
// in all.
type cpuTimes struct{ busy, total time.Duration }

// cpuBusy reads cpuTimes from /proc/stat (first line), and false where it
// cannot be read. Every process counts: PostgreSQL's backends, the bench's
// writers, relays and broker, and whatever else runs.
func cpuBusy() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPUBusy(line)
}

// parseCPUBusy reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq, steal, ... in USER_HZ ticks. Busy is
// user+nice+system+irq+softirq (guest time is already part of user), the
// total these and idle, iowait and steal.
func parseCPUBusy(line string) (cpuTimes, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var busy, total int64
	for i := 1; i <= 8; i++ { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		total += v
		if i != 4 && i != 5 && i != 8 {
			busy += v
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / userHz }
	return cpuTimes{busy: tick(busy), total: tick(total)}, true
}

// cpuUse is the machine's busy CPU time, and all CPUs' time, over a
// stretch of wall time in which a number of units of work (messages,
// transactions) were done.
type cpuUse struct {
	busy, total, wall time.Duration
	units             float64
	ok                bool
}

// measureCPU runs fn and returns the machine's CPU use meanwhile, with the
// units fn reports.
func measureCPU(fn func() (units float64, err error)) (cpuUse, error) {
	c0, ok0 := cpuBusy()
	t0 := time.Now()
	units, err := fn()
	wall := time.Since(t0)
	c1, ok1 := cpuBusy()
	return cpuUse{busy: c1.busy - c0.busy, total: c1.total - c0.total, wall: wall, units: units, ok: ok0 && ok1}, err
}

// sumCPU adds stretches up; it is not measured if one of them was not.
func sumCPU(uses []cpuUse) cpuUse {
	sum := cpuUse{ok: len(uses) > 0}
	for _, u := range uses {
		sum.busy += u.busy
		sum.total += u.total
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
// was not measured. Both come from the same ticks, so a short stretch
// cannot come out above 100% (busy ticks over wall time could).
func (c cpuUse) busyPercent() float64 {
	if !c.ok || c.total <= 0 {
		return 0
	}
	return 100 * c.busy.Seconds() / c.total.Seconds()
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
