package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion_PrintsTheModuleVersionAndTheCommit(t *testing.T) {
	t.Parallel()
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"a tagged build from a clean checkout",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: vcs(
				"vcs", "git", "vcs.revision", "0f3c9e1a2b", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "false")},
			"outbox v1.4.0\ncommit 0f3c9e1a2b 2026-12-01T10:00:00Z\n"},
		{"a build with uncommitted changes",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.4.1-0.20261201100000-0f3c9e1a2b3c+dirty"}, Settings: vcs(
				"vcs.revision", "0f3c9e1a2b3c", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "true")},
			"outbox v1.4.1-0.20261201100000-0f3c9e1a2b3c+dirty\ncommit 0f3c9e1a2b3c 2026-12-01T10:00:00Z, modified\n"},
		{"a build without version control information",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("-buildvcs", "false")},
			"outbox (devel)\ncommit (devel)\n"},
		{"no module version", &debug.BuildInfo{}, "outbox (devel)\ncommit (devel)\n"},
		{"no build information", nil, "outbox (devel)\ncommit (devel)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readBuild(tc.info, tc.info != nil).text("outbox"); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// 'outbox version' prints two lines: the command's name and version, then
// the commit (this test binary has no commit: it says so).
func TestVersionCommand_PrintsTwoLinesNamingTheCommandAndTheCommit(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "version")
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if res.code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], "outbox ") || !strings.HasPrefix(lines[1], "commit ") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and two lines: outbox <version>, commit <revision>", res.code, res.stdout, res.stderr)
	}
	if res := runCLI(t, nil, "version", "extra"); res.code != exitUsage {
		t.Errorf("version extra: exit %d; want %d", res.code, exitUsage)
	}
}
