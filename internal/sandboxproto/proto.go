// Package sandboxproto is the wire protocol between the host and the agent
// inside a sandbox: JSON lines over the agent's stdin and stdout, requests
// multiplexed by id, output streamed in chunks before a final reply.
package sandboxproto

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Ops.
const (
	OpExec    = "exec"    // a new process
	OpSession = "session" // a command in the persistent bash session
	OpRead    = "read"
	OpWrite   = "write"
	OpList    = "list"
	OpPing    = "ping"
)

// EnvVar carries the sandbox's own environment to the agent (the task's
// SandboxSpec.Env, and TMPDIR where the driver gives one), which every
// command inherits: one variable, encoded by EncodeEnv, because each
// driver quotes the values it passes in its own way (Apptainer expands
// them as a shell would), and an encoding with none of the characters
// that matter passes through all of them unchanged.
const EnvVar = "PRORL_SANDBOX_ENV"

// EncodeEnv is EnvVar's value for env: its JSON in unpadded base64url.
func EncodeEnv(env map[string]string) string {
	b, _ := json.Marshal(env) // a map of strings always encodes
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeEnv reads EnvVar's value ("" is no variables).
func DecodeEnv(s string) (map[string]string, error) {
	env := map[string]string{}
	if s == "" {
		return env, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return env, nil
}

// Request is one operation.
type Request struct {
	ID        uint64            `json:"id"`
	Op        string            `json:"op"`
	Argv      []string          `json:"argv,omitempty"`
	Command   string            `json:"command,omitempty"`
	TimeoutMS uint32            `json:"timeout_ms,omitempty"`
	Stdin     []byte            `json:"stdin,omitempty"`
	Workdir   string            `json:"workdir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Path      string            `json:"path,omitempty"`
	Data      []byte            `json:"data,omitempty"`
	Mode      uint32            `json:"mode,omitempty"`
	MaxBytes  uint64            `json:"max_bytes,omitempty"`
	// Append writes Data at the end of Path (a large write comes in chunks).
	Append bool `json:"append,omitempty"`
	// StdinPath, for a large stdin, names a file the host wrote in
	// chunks: the command reads it as stdin, and the agent removes it.
	StdinPath string `json:"stdin_path,omitempty"`
}

// Entry is a directory entry.
type Entry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir,omitempty"`
	Size uint64 `json:"size"`
	Mode uint32 `json:"mode"`
}

// Reply is a chunk of output or the final answer (Done) of a request.
type Reply struct {
	ID        uint64  `json:"id"`
	Stdout    []byte  `json:"stdout,omitempty"`
	Stderr    []byte  `json:"stderr,omitempty"`
	Done      bool    `json:"done,omitempty"`
	ExitCode  int     `json:"exit_code"`
	TimedOut  bool    `json:"timed_out,omitempty"`
	Truncated bool    `json:"truncated,omitempty"`
	Error     string  `json:"error,omitempty"`
	Data      []byte  `json:"data,omitempty"`
	Entries   []Entry `json:"entries,omitempty"`
	// Isolation, on a ping's reply, says how commands are isolated:
	// "namespaces", or "none: REASON".
	Isolation string `json:"isolation,omitempty"`
}

// Limits are applied to every process the agent starts.
type Limits struct {
	CPUSeconds   uint64 `json:"cpu_seconds,omitempty"`
	MemoryBytes  uint64 `json:"memory_bytes,omitempty"` // RLIMIT_AS
	MaxProcesses uint64 `json:"max_processes,omitempty"`
	MaxFileBytes uint64 `json:"max_file_bytes,omitempty"`
	// MaxOutputBytes caps what one command returns; the rest is dropped and reported.
	MaxOutputBytes uint64 `json:"max_output_bytes,omitempty"`
	// Seccomp is "default" (the deny list of internal/seccomp, less the
	// groups in SeccompAllow) or "off".
	Seccomp      string   `json:"seccomp,omitempty"`
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	// Isolate runs every command in its own user, pid and mount namespace
	// (with its own /proc), where the agent and other commands' processes
	// cannot be seen, signalled or traced, and a timeout ends everything
	// the command started. RequireIsolation refuses to run commands when
	// the namespaces cannot be made, instead of running them without.
	Isolate          bool `json:"isolate,omitempty"`
	RequireIsolation bool `json:"require_isolation,omitempty"`
}
