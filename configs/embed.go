// Package configs embeds the example deployments so the host runs with
// sensible defaults when no config file is given.
package configs

import _ "embed"

// Local is configs/local.toml: one workstation.
//
//go:embed local.toml
var Local []byte

// Harnesses is configs/harnesses.toml: the agent harness presets every
// host knows, under its own configuration.
//
//go:embed harnesses.toml
var Harnesses []byte
