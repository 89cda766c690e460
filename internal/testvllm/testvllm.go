// Package testvllm starts a real vLLM server for tests that compare with it:
// vLLM's CPU build and a random-weight model of Qwen3's architecture on
// Qwen3's tokenizer, both made by `python3 scripts/ref.py install vllm` (make vllm).
package testvllm

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/internal/syncbuf"

	"github.com/prorl/prorl/sdk/sdktest"
)

// Model is the name the server answers to.
const Model = "tiny"

// Paths are the venv's python and the model directory, or a skip (a
// failure under PRORL_REQUIRE_REFS=1, as make test sets) when missing.
func Paths(tb testing.TB) (python, modelDir string) {
	tb.Helper()
	home, _ := os.UserHomeDir()
	python = filepath.Join(home, ".cache", "prorl", "venv-vllm", "bin", "python")
	modelDir = filepath.Join(home, ".cache", "prorl", "models", "tiny-qwen3-vllm")
	for _, p := range []string{python, filepath.Join(modelDir, "model.safetensors")} {
		if _, err := os.Stat(p); err != nil {
			sdktest.Missing(tb, "vLLM (make vllm)", err)
		}
	}
	return python, modelDir
}

// Start runs vLLM's OpenAI-compatible server on a free loopback port with
// flags added to its own (eager mode, so that it is up in under a minute
// here), waits until /health answers, and stops the server and its engine
// processes when the test ends. It returns the base URL.
func Start(tb testing.TB, flags ...string) string {
	tb.Helper()
	python, modelDir := Paths(tb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := append([]string{"-m", "vllm.entrypoints.openai.api_server", "--model", modelDir, "--served-model-name", Model,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--enforce-eager", "--disable-uvicorn-access-log"}, flags...)
	cmd := exec.Command(python, args...)
	// Its temporary files (vllm_dist_*, which a killed server leaves) in a
	// directory removed after it; a short path, for its IPC sockets.
	tmp, err := os.MkdirTemp("", "vllm")
	if err != nil {
		tb.Fatal(err)
	}
	// 1 GiB of KV cache (the CPU backend's own budget; --num-gpu-blocks-override
	// narrows it), nothing fetched, no usage report; scripts/vllm importable
	// (--logits-processors tool_script:ToolScript).
	cmd.Env = append(os.Environ(), "VLLM_CPU_KVCACHE_SPACE=1", "HF_HUB_OFFLINE=1", "VLLM_NO_USAGE_STATS=1", "DO_NOT_TRACK=1",
		"PYTHONPATH="+scriptsDir(tb), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its engine runs in child processes
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any engine process left
		os.RemoveAll(tmp)
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if res, err := http.Get(url + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return url
			}
		}
		select {
		case <-exited:
			tb.Fatalf("vLLM exited before it served:\n%s", tail(out.Bytes()))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("vLLM did not serve within 5 minutes:\n%s", tail(out.Bytes()))
		}
	}
}

// scriptsDir is this checkout's scripts/vllm (tests run in their package's
// directory).
func scriptsDir(tb testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "vllm")
		}
		if dir == filepath.Dir(dir) {
			tb.Fatal("no go.mod above the test's directory")
		}
	}
}

// tail is the end of the server's log, where its error is.
func tail(b []byte) []byte {
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return bytes.TrimSpace(b)
}
