package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// 'outbox mode' shows the recorded mode, since when and who switched;
// 'outbox mode set' switches, says what it did, and does nothing the second
// time; every other tool reports the same mode.
func TestMode_ShowsAndSwitches(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	out := f.mustRun(t, exitOK, "mode").stdout
	if !strings.Contains(out, "Mode:     claim") || !strings.Contains(out, "By:       migration 017") {
		t.Fatalf("outbox mode on a new outbox:\n%s", out)
	}
	out = f.mustRun(t, exitOK, "mode", "set", "cursor", "--actor", "alice").stdout
	if !strings.Contains(out, "switched from claim to cursor mode") || !strings.Contains(out, "QUEUED") {
		t.Fatalf("mode set cursor:\n%s", out)
	}
	out = f.mustRun(t, exitOK, "mode", "set", "cdc", "--actor", "bob").stdout
	if !strings.Contains(out, "switched from cursor to cdc mode") || !strings.Contains(out, "0 unsent QUEUED message(s) moved to PENDING") {
		t.Fatalf("mode set cdc:\n%s", out)
	}
	if out := f.mustRun(t, exitOK, "mode", "set", "cdc").stdout; !strings.Contains(out, "already in cdc mode") || !strings.Contains(out, "By:       bob") {
		t.Fatalf("mode set cdc again:\n%s", out)
	}
	var m modeJSON
	if err := json.Unmarshal([]byte(f.mustRun(t, exitOK, "mode", "--json").stdout), &m); err != nil {
		t.Fatal(err)
	}
	if m.Mode != "cdc" || m.By != "bob" || !m.Recorded || m.Since == nil || time.Since(*m.Since) > time.Minute {
		t.Fatalf("mode --json = %+v", m)
	}
	for _, args := range [][]string{{"stats"}, {"cursor", "status"}} {
		if out := f.mustRun(t, exitOK, args...).stdout; !strings.Contains(out, "Mode:               cdc (since ") ||
			!strings.Contains(out, "switched by bob") {
			t.Errorf("outbox %s does not report cdc mode:\n%s", strings.Join(args, " "), out)
		}
	}
	var s statsOutput
	if err := json.Unmarshal([]byte(f.mustRun(t, exitOK, "stats", "--json").stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Mode != "cdc" || s.Cursor.ModeBy != "bob" {
		t.Errorf("stats --json: mode %q by %q, want cdc by bob", s.Mode, s.Cursor.ModeBy)
	}
	if res := f.run(t, "mode", "set", "polling"); res.code != exitUsage || !strings.Contains(res.stderr, "claim, cursor or cdc") {
		t.Errorf("mode set polling: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	// cursor enable is the same switch, but does not leave CDC mode.
	if res := f.run(t, "cursor", "enable"); res.code != exitError || !strings.Contains(res.stderr, "outbox mode set cursor") {
		t.Errorf("cursor enable in cdc mode: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// A relay whose --mode differs from the recorded mode refuses to start,
// naming both modes and the switch; without --mode it runs the recorded
// mode, CDC included.
func TestRelay_RunsTheRecordedModeAndRefusesAnother(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	t.Cleanup(func() { dropSlot(t, f) })
	env := relayEnv(t, f)
	for _, c := range []struct{ mode, flag, want string }{
		{"claim", "cdc", "is in claim mode, not cdc; run 'outbox mode set cdc' to switch, or start the relay without --mode"},
		{"cursor", "claim", "is in cursor mode, not claim; run 'outbox mode set claim' to switch"},
		{"cdc", "polling", "is in cdc mode, and --mode polling runs claim or cursor mode; run 'outbox mode set claim'"},
	} {
		f.mustRun(t, exitOK, "mode", "set", c.mode)
		res := runCLI(t, env, "relay", "--mode", c.flag)
		if res.code != exitError || !strings.Contains(res.stderr, "the outbox in schema "+f.schema+" "+c.want) {
			t.Errorf("relay --mode %s on an outbox in %s mode: exit %d, stderr:\n%s", c.flag, c.mode, res.code, res.stderr)
		}
	}

	f.enqueue(t, 20)
	_, stderr, stop, done := startCLI(env, "relay", "--slot", "outbox_"+f.schema)
	defer stop()
	f.waitSent(t, 60*time.Second, stderr)
	if !strings.Contains(stderr.String(), `msg="relay mode" mode=cdc`) || !strings.Contains(stderr.String(), "the outbox is in cdc mode: running the CDC relay") {
		t.Errorf("the relay did not run in the recorded cdc mode:\n%s", stderr)
	}
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr)
	}
}

// A relay in claim mode whose outbox is switched to CDC mode goes on (both
// at once is safe) but is not ready, saying to restart it without --mode.
func TestRelay_NotReadyOnceTheOutboxSwitchesToCDC(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	_, stderr, stop, done := startCLI(relayEnv(t, f), "relay")
	defer stop()
	base := adminAddr(t, stderr, done)
	stderr.WaitFor(t, `msg="relay mode" mode=claim`, 30*time.Second, done)
	f.mustRun(t, exitOK, "mode", "set", "cdc")
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, checks := readyz(t, base)
		if code == 503 && strings.Contains(checks["mode"], "is in cdc mode: restart this relay without --mode") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30 s after the switch: %d %v", code, checks)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr)
	}
}
