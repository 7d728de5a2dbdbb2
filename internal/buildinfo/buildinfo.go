// Package buildinfo is the one source of acpx-sidecar's version at run
// time: what `acpx-sidecar --version` prints, initialize reports as
// serverInfo.version (docs/protocol.md §2) and the Go client sends as its
// clientInfo.version.
//
// The version is set once, at build time: `make build`, `make npm-pack`
// and `make release` pass the repository's VERSION file as
//
//	-ldflags "-X github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo.version=<VERSION>"
//
// and the npm packages are stamped with the same value. A build without it
// (`go build`, `go install …@v1.2.3`, a Go host importing the client)
// reports the module version the Go toolchain recorded (debug.ReadBuildInfo:
// the tag it was fetched at, or a VCS pseudo-version of a checkout),
// without its leading "v"; failing that, Dev.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// ModulePath is this repository's Go module.
const ModulePath = "github.com/acpx-sidecar/acpx-sidecar"

// Dev is the version of a build that carries none.
const Dev = "0.0.0-dev"

// version is set with -ldflags -X (see the package doc); "" when not.
var version string

// Version returns the version this binary was built as (see the package
// doc for where it comes from).
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, bi)
}

// resolve picks the version: the -X value, else this module's version in
// bi (as the main module or as a dependency), else Dev.
func resolve(set string, bi *debug.BuildInfo) string {
	if v := strings.TrimSpace(set); v != "" {
		return v
	}
	if bi != nil {
		mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
		for _, m := range mods {
			if m != nil && m.Path == ModulePath && m.Version != "" && m.Version != "(devel)" {
				return strings.TrimPrefix(m.Version, "v")
			}
		}
	}
	return Dev
}
