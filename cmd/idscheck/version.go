package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/idscheck/idscheck/reports"
)

// readBuildInfo is debug.ReadBuildInfo; tests give their own.
var readBuildInfo = debug.ReadBuildInfo

// buildVersion is what `idscheck version` prints: the version every report
// records (reports.CurrentTool, from the same build information), and the
// module and VCS revision it stands on.
type buildVersion struct {
	Name      string `json:"name"`
	Version   string `json:"version"` // as the reports record it
	Module    string `json:"module,omitempty"`
	ModuleVer string `json:"module_version,omitempty"`
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	Modified  bool   `json:"vcs_modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func currentVersion() buildVersion {
	tool := reports.CurrentTool()
	v := buildVersion{Name: tool.Name, Version: tool.Version, GoVersion: tool.GoVersion, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := readBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.ModuleVer = bi.Main.Path, bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

const versionSynopsis = `version [--json]

Prints the version of this build, as every report records it (result.json's
tool.version), then the module version and the VCS revision it was built
from (runtime/debug.ReadBuildInfo). 'idscheck --version' is the same.`

// cmdVersion is `idscheck version` (and `idscheck --version`).
func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print the build information as a JSON object")
	if code, stop := parseFlags(fs, args, false, stdout); stop {
		return code
	}
	v := currentVersion()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "idscheck version: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "%s %s\n", v.Name, v.Version)
	if v.Module != "" {
		mv := v.ModuleVer
		if mv == "" {
			mv = "(unknown)"
		}
		fmt.Fprintf(stdout, "module   %s %s\n", v.Module, mv)
	}
	switch {
	case v.Revision != "":
		rev := v.Revision
		if v.Time != "" {
			rev += " (" + v.Time + ")"
		}
		if v.Modified {
			rev += ", with uncommitted changes"
		}
		fmt.Fprintf(stdout, "revision %s\n", rev)
	default:
		fmt.Fprintln(stdout, "revision unknown: this build carries no VCS stamp (go run, go test, or -buildvcs=false); build it with 'go build -buildvcs=true ./cmd/idscheck' in a git checkout")
	}
	fmt.Fprintf(stdout, "go       %s %s\n", v.GoVersion, v.Platform)
	return exitOK
}
