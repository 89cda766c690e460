package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

// TestLlamaCppGateway drives the gateway with the official OpenAI and
// Anthropic Python SDKs (scripts/gateway/sdk_agent.py: its own agent loop
// over each SDK, streamed) against a real inference engine (llama.cpp on
// CPU, the host's Go tokenizer): every session's traces are exactly the
// prompts the engine was sent and the ids and logprobs it returned, and
// the calls of a session merge into one trace.
func TestLlamaCppGateway(t *testing.T) {
	modelDir := filepath.Join(testmodels.Dir(t), "tiny-gpt2-llama")
	if _, err := os.Stat(filepath.Join(modelDir, "model.gguf")); err != nil {
		t.Fatalf("tiny model missing (make models): %v", err)
	}
	py := sdktest.Reference(t, "../scripts/ref.py", "client")
	url, logPath := startLlamaCpp(t, modelDir)
	e := newEnv(t, envOpts{extraTOML: "[tokenizer]\nmodel_dir = \"" + modelDir + "\"\n"})
	e.startHost()
	e.register(map[string]any{"url": url, "protocol": "vllm"})
	merged, calls := sdkSessions(t, e, py, logPath, 3)
	if merged == 0 {
		t.Fatalf("no call merged into a trace in %d calls: the test proved nothing about splicing", calls)
	}
	t.Logf("llama.cpp through the gateway: 6 sessions (OpenAI and Anthropic SDKs), %d calls, %.0f merged, every token the engine's", calls, merged)
}

// sdkSessions runs scripts/gateway/sdk_agent.py against the host: perSDK
// sessions of the math task through each of the OpenAI and Anthropic SDKs.
// Every session must complete with its traces exactly the engine's
// (logPath); it returns the calls merged into a trace and the calls made.
func sdkSessions(t *testing.T, e *env, py, logPath string, perSDK int) (merged float64, calls int) {
	t.Helper()
	task, _ := json.Marshal(map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"})
	out, err := exec.Command(py, "../scripts/gateway/sdk_agent.py", e.host, string(task), strconv.Itoa(perSDK), "7").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("sdk_agent.py: %v\n%s\n%s", err, out, tail(stderr, 4000))
	}
	log := readEntries(t, logPath)
	sdks := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, sdk, _ := strings.Cut(line, " ")
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted {
			t.Fatalf("%s (%s): %s %+v", id, sdk, res.Status, res.Failure)
		}
		checkTraces(t, res, log)
		merged += res.Metrics["gateway_merged_calls"]
		calls += len(res.Turns)
		sdks[sdk]++
	}
	if sdks["run_openai"] != perSDK || sdks["run_anthropic"] != perSDK {
		t.Fatalf("sessions per SDK: %v", sdks)
	}
	return merged, calls
}
