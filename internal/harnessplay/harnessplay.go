// Package harnessplay is how the inference simulator plays real agent
// harnesses: each harness's own tool for running a command and how it ends
// a task, as simulator scripts. The e2e tests and the benchmarks drive the
// harness presets with it.
package harnessplay

import "encoding/json"

// Harness is one preset's vocabulary.
type Harness struct {
	Name string
	// Run is the harness's command tool called with cmd.
	Run func(cmd string) map[string]any
	// Finish are the calls that end its task (mini-swe-agent submits with a
	// command; the others end on a reply without tool calls).
	Finish []map[string]any
}

// Harnesses are the presets of configs/harnesses.toml.
var Harnesses = []Harness{
	{Name: "mini-swe-agent", Run: func(cmd string) map[string]any {
		return map[string]any{"tool": "bash", "arguments": map[string]any{"command": cmd}}
	}, Finish: []map[string]any{{"tool": "bash", "arguments": map[string]any{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}}},
	{Name: "codex", Run: func(cmd string) map[string]any {
		return map[string]any{"tool": "exec_command", "arguments": map[string]any{"cmd": cmd}}
	}},
	{Name: "claude-code", Run: func(cmd string) map[string]any {
		return map[string]any{"tool": "Bash", "arguments": map[string]any{"command": cmd, "description": "run it"}}
	}},
}

// Instruction is what a harness is told, so that the simulator can tell
// the harnesses' scripts apart.
func (h Harness) Instruction(task string) string { return "Using " + h.Name + ": " + task }

// Script is a simulator script (one JSONL line) for the task: the right
// commands, then the harness's end; drawn wrong, the wrong commands (none:
// it gives up), then its end.
func (h Harness) Script(task string, right, wrong []string) string {
	play := func(cmds []string) []map[string]any {
		var calls []map[string]any
		for _, c := range cmds {
			calls = append(calls, h.Run(c))
		}
		return append(calls, h.Finish...)
	}
	s, _ := json.Marshal(map[string]any{"key": h.Instruction(task), "calls": play(right), "final": "Fixed.",
		"wrong": map[string]any{"calls": play(wrong), "final": "Done."}})
	return string(s)
}

// Answer is a script for a question the harness answers in its last reply
// (Codex, Claude Code): no command, the right or the wrong answer.
func (h Harness) Answer(question, right, wrong string) string {
	s, _ := json.Marshal(map[string]any{"key": h.Instruction(question), "final": right, "wrong": map[string]any{"final": wrong}})
	return string(s)
}
