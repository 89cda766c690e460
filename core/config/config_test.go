package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/prorl/prorl/core/backend"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown top key", "bogus = 1\n", `:1: unknown key "bogus"`},
		{"unknown nested key", "[server]\nlisten = \"127.0.0.1:1\"\nlistn = \"x\"\n", `:3: unknown key "server.listn"`},
		{"unknown plugin key", "[plugins.math]\nenabled = true\npath = \"/x\"\nshaa = \"\"\n", `:4: unknown key "plugins.math.shaa"`},
		{"syntax", "[server\n", "t.toml:2: expected"},
		{"bad duration", "[pipeline]\nrollout_timeout = \"soon\"\n", "pipeline.rollout_timeout"},
		{"negative workers", "[pipeline]\nrun_workers = 0\n", "pipeline.run_workers: must be positive"},
		{"idempotency ttl under a second", "[server]\nidempotency_ttl = \"10ms\"\n", "server.idempotency_ttl: must be at least 1s"},
		{"remote listen", "[server]\nlisten = \"0.0.0.0:8006\"\n", "server.listen"},
		{"bad sha", "[plugins.math]\nenabled = true\npath = \"/x\"\nsha256 = \"abc\"\n", "plugins.math.sha256: must be 64 hex digits"},
		{"no path", "[plugins.math]\nenabled = true\n", "plugins.math.path: required"},
		{"bad protocol", "[[backends.static]]\nurl = \"http://127.0.0.1:1\"\nprotocol = \"grpc\"\n", `backends.static[0].protocol: unknown protocol "grpc"`},
		{"sglang without a Go tokenizer", "[[backends.static]]\nurl = \"http://127.0.0.1:1\"\nprotocol = \"sglang\"\n", `backends.static[0].protocol: sglang has no chat tokenizer: set tokenizer.model_dir`},
		{"negative slots", "[[backends.static]]\nurl = \"http://127.0.0.1:1\"\nslots = -1\n", "backends.static[0].slots: must not be negative"},
		{"negative length memory", "[pipeline]\nexpected_tokens_memory = -1\n", "pipeline.expected_tokens_memory: must not be negative"},
		{"overcommit below 1", "[backends]\ncache_overcommit = 0.9\n", "backends.cache_overcommit: must be at least 1, got 0.9"},
		{"overcommit NaN", "[backends]\ncache_overcommit = nan\n", "backends.cache_overcommit: must be at least 1, got NaN"},
		{"negative cache", "[[backends.static]]\nurl = \"http://127.0.0.1:1\"\ncache_tokens = -5\n", "backends.static[0].cache_tokens: must not be negative"},
		{"backend without a scheme", "[[backends.static]]\nurl = \"gpu-1:8000\"\n", "backends.static[0].url: must be an http(s) base URL"},
		{"backend socket not absolute", "[[backends.static]]\nurl = \"unix:vllm.sock\"\n", "backends.static[0].url: a Unix socket is unix:///absolute/path/to/socket"},
		{"bad log level", "[log]\nlevel = \"loud\"\n", "log.level"},
		{"remote without a token", "[server]\nlisten = \"0.0.0.0:8006\"\nallow_remote = true\n", "server.allow_remote: exposing the API without a token"},
		{"empty token file", "[server]\ntoken_file = \"/dev/null\"\n", "server.token_file: /dev/null is empty"},
		{"unreadable token file", "[server]\ntoken_file = \"/nonexistent/token\"\n", "server.token_file"},
		{"bad format", "[agent]\ntool_call_format = \"xml\"\n", "agent.tool_call_format"},
		{"bad chat format", "[tokenizer]\nchat_format = \"chatml\"\n", `tokenizer.chat_format: must be template or harmony, not "chatml"`},
		{"bad reasoning effort", "[tokenizer]\nreasoning_effort = \"max\"\n", "tokenizer.reasoning_effort"},
		{"bad date", "[tokenizer]\nconversation_date = \"28/06/2025\"\n", "tokenizer.conversation_date: must be YYYY-MM-DD"},
		{"template with harmony", "[tokenizer]\nchat_format = \"harmony\"\nchat_template = \"x.jinja\"\n", "tokenizer.chat_template: is not used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "t.toml", Vars{ConfigDir: "/c"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseDefaultsAndExpansion(t *testing.T) {
	doc := `
[server]
allow_remote = true
insecure = true
listen = "0.0.0.0:9000"
[plugins.math]
enabled = true
path = "{exe_dir}/plugins/prorl-math"
args = ["-v"]
[plugins.math.config]
max_turns = 3
anything = { nested = [1, 2], dirs = ["{exe_dir}/a", "rel"] }
image_dir = "{cache_dir}/prorl/images"
prompt = "Solve it in {config_dir}"
[plugins.off]
enabled = false
path = "rel/bin"
`
	c, err := Parse([]byte(doc), "t.toml", Vars{ConfigDir: "/cfg", ExeDir: "/opt/prorl", CacheDir: "/var/cache"})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plugins["math"]
	if p.Path != "/opt/prorl/plugins/prorl-math" || p.StartTimeout.Seconds() != 10 || p.MaxRestarts != 5 {
		t.Errorf("plugin = %+v", p)
	}
	if p.Config["max_turns"] != int64(3) {
		t.Errorf("config table = %#v", p.Config)
	}
	// Variables expand in plugin config strings; nothing else is resolved.
	nested := p.Config["anything"].(map[string]any)["dirs"].([]any)
	if p.Config["image_dir"] != "/var/cache/prorl/images" || p.Config["prompt"] != "Solve it in /cfg" || nested[0] != "/opt/prorl/a" || nested[1] != "rel" {
		t.Errorf("expansion in the config table = %#v", p.Config)
	}
	if c.Plugins["off"].Path != "/cfg/rel/bin" {
		t.Errorf("relative path = %q", c.Plugins["off"].Path)
	}
	if len(c.EnabledPlugins()) != 1 {
		t.Errorf("enabled = %v", c.EnabledPlugins())
	}
	if c.Pipeline.RunWorkers != 1024 || c.Agent.MaxTurns != 8 {
		t.Errorf("defaults lost: %+v %+v", c.Pipeline, c.Agent)
	}
}

func TestLocalConfigParses(t *testing.T) {
	data, err := os.ReadFile("../../configs/local.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data, "local.toml", Vars{ConfigDir: "/c", ExeDir: "/e"}); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("[server]\nlisten = \"127.0.0.1:1\"\n"))
	f.Add([]byte("[plugins.x]\nenabled = true\npath = \"/p\"\n[plugins.x.config]\na = 1\n"))
	f.Add([]byte("[[backends.static]]\nurl = \"u\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "f.toml", Vars{ConfigDir: "/c"})
		if err == nil && c.Validate() != nil {
			t.Fatal("Parse accepted a config that does not validate")
		}
	})
}

// TestOverlays: PATH.d/*.toml apply over the config in name order (tables
// merge key by key, values replace), --plugin tables last; an unknown key
// is named with its own file and line.
func TestOverlays(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "host.toml")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(main, "[server]\nlisten = \"127.0.0.1:8006\"\n[plugins.math]\nenabled = true\npath = \"bin/math\"\n[plugins.math.config]\nmax_turns = 4\n")
	write(filepath.Join(dir, "host.toml.d", "10-countdown.toml"), "[plugins.countdown]\nenabled = true\npath = \"/opt/countdown\"\n[plugins.countdown.config]\nmax_turns = 3\n")
	write(filepath.Join(dir, "host.toml.d", "20-math.toml"), "[plugins.math.config]\nmax_turns = 8\n")
	write(filepath.Join(dir, "host.toml.d", "notes.txt"), "not a config")
	_, py, err := PluginFlag("wordle=/venv/bin/python /srv/wordle.py")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadWith(main, nil, map[string]any{"plugins": map[string]any{"wordle": py}})
	if err != nil {
		t.Fatal(err)
	}
	m, c, w := cfg.Plugins["math"], cfg.Plugins["countdown"], cfg.Plugins["wordle"]
	if m == nil || c == nil || w == nil {
		t.Fatalf("plugins %v", cfg.Plugins)
	}
	if m.Path != filepath.Join(dir, "bin/math") || m.Config["max_turns"] != int64(8) || c.Path != "/opt/countdown" || c.Config["max_turns"] != int64(3) ||
		!c.Enabled || c.StartTimeout.Duration != 10*time.Second || w.Path != "/venv/bin/python" || len(w.Args) != 1 || w.Args[0] != "/srv/wordle.py" {
		t.Fatalf("math %+v\ncountdown %+v\nwordle %+v", m, c, w)
	}
	write(filepath.Join(dir, "host.toml.d", "30-bad.toml"), "[server]\n\nlisten_on = \"x\"\n")
	if _, err := Load(main); err == nil || !strings.Contains(err.Error(), "30-bad.toml:3: unknown key \"server.listen_on\"") {
		t.Fatalf("unknown key in an overlay: %v", err)
	}
	for _, bad := range []string{"countdown", "=/bin/x", "a.b=/bin/x", "x="} {
		if _, _, err := PluginFlag(bad); err == nil {
			t.Errorf("--plugin %q accepted", bad)
		}
	}
}

func TestRenamedKeyIsNamed(t *testing.T) {
	_, err := Parse([]byte("[sandbox]\nagent = \"/x\"\n"), "old.toml", Vars{})
	if err == nil || !strings.Contains(err.Error(), `old.toml:2: unknown key "sandbox.agent" (renamed agent_binary`) {
		t.Fatalf("%v", err)
	}
}

// FuzzPluginFlag: a flag is refused or gives a table with a name that is a
// bare TOML key and a path.
func FuzzPluginFlag(f *testing.F) {
	for _, s := range []string{"countdown=/bin/c", "w=/venv/bin/python /srv/w.py", "=x", "a.b=/x", "x="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		name, table, err := PluginFlag(v)
		if err != nil {
			return
		}
		if !bareKey.MatchString(name) || table["path"] == "" || table["enabled"] != true {
			t.Fatalf("%q: %q %v", v, name, table)
		}
	})
}

// TestDefaultsMatchPool: the config's default overcommit is the pool's
// (the config does not import the backend package for one constant).
func TestDefaultsMatchPool(t *testing.T) {
	if got := Default().Backends.CacheOvercommit; got != backend.DefaultCacheOvercommit {
		t.Fatalf("config default cache_overcommit %g, pool default %g", got, backend.DefaultCacheOvercommit)
	}
}

// The docs' TOML samples are what an admin copies: each must decode
// strictly (no key the host would refuse as unknown, no wrong type). They
// are samples, not deployments, so the checks that need real files (a
// plugin's path and sha256) are not made.
func TestDocSamples(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	blocks := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```toml" {
				continue
			}
			start := i + 1
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			doc := []byte(strings.Join(lines[start:i], "\n"))
			name := fmt.Sprintf("%s, the sample from line %d, line", filepath.Base(file), start+1)
			blocks++
			md, err := toml.NewDecoder(bytes.NewReader(doc)).Decode(Default())
			if err != nil {
				t.Errorf("%v", parseError(name, err))
				continue
			}
			if err := undecoded(md, doc, name); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
	if blocks < 3 {
		t.Fatalf("found %d TOML samples in the docs; the test's reading of them is broken", blocks)
	}
}
