package main

import "runtime/debug"

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = ""

// currentVersion is the stamped version, else the module version the
// binary was built from, else "devel".
func currentVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
