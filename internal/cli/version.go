package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// develVersion stands for a version or commit the binary does not know.
const develVersion = "(devel)"

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit this binary was built from",
		Long: `version prints the module version of this binary, then the version control
commit it was built from, the commit's time, and "modified" when the
working tree had uncommitted changes. A binary built without version
control information (go build -buildvcs=false, or outside a checkout)
prints (devel) for what it does not know.`,
		Example: `  outbox version`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			_, err := fmt.Fprint(a.stdout, readBuild(info, ok).text(cmd.Root().Name()))
			return err
		},
	}
}

// build is what the Go toolchain recorded about the build of this binary.
type build struct {
	version  string // module version: a tag, a pseudo-version, or (devel)
	revision string // commit, or (devel)
	time     string // commit time in RFC 3339, or empty
	modified bool   // the working tree had uncommitted changes
}

// readBuild reads the module version and the vcs.* settings of info (ok
// false: none recorded).
func readBuild(info *debug.BuildInfo, ok bool) build {
	b := build{version: develVersion, revision: develVersion}
	if !ok || info == nil {
		return b
	}
	if info.Main.Version != "" {
		b.version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// text is the output of 'version' for the command named name, two lines:
//
//	outbox v1.4.0
//	commit 0f3c9e1... 2026-12-01T10:00:00Z, modified
func (b build) text(name string) string {
	commit := "commit " + b.revision
	if b.time != "" {
		commit += " " + b.time
	}
	if b.modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s %s\n%s\n", name, b.version, commit)
}

// buildVersion is the module version the binary was built from, for
// --version.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return readBuild(info, ok).version
}
