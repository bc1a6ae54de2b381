package main

import (
	"runtime"
	"runtime/debug"
)

// version overrides the module version reported by --version, the startup log line and the
// kvselect_build_info metric: go build -ldflags "-X main.version=v1.2.3" ./cmd/kvselect. Empty
// means the version recorded in the binary's build information (a tagged module version for
// `go install ...@v1.2.3`, "(devel)" for a build from a checkout).
var version = ""

// buildVersion is what the binary knows about its own build.
type buildVersion struct {
	Version   string // ldflags override, else the main module's version, else "(devel)"
	GoVersion string // toolchain that built the binary
	Revision  string // VCS revision (with "-dirty" for a modified tree), "" when unknown
}

// readBuildVersion reads the build information embedded by the Go toolchain.
func readBuildVersion() buildVersion {
	v := buildVersion{Version: version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if bi.GoVersion != "" {
			v.GoVersion = bi.GoVersion
		}
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && v.Revision != "" {
			v.Revision += "-dirty"
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

// String is the --version line: "kvselect <version> (<go version>, revision <rev>)".
func (v buildVersion) String() string {
	s := "kvselect " + v.Version + " (" + v.GoVersion
	if v.Revision != "" {
		s += ", revision " + v.Revision
	}
	return s + ")"
}
