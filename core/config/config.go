// Package config loads the host's TOML configuration strictly: unknown keys
// are errors naming the key and its line, every value is validated, and
// defaults fill what a deployment leaves out.
package config

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/prorl/prorl/core/baseurl"
	"github.com/prorl/prorl/core/egress"
)

// Duration is a time.Duration written as "30s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole host configuration.
type Config struct {
	Server    Server             `toml:"server"`
	Pipeline  Pipeline           `toml:"pipeline"`
	Agent     Agent              `toml:"agent"`
	Tokenizer Tokenizer          `toml:"tokenizer"`
	Backends  Backends           `toml:"backends"`
	Compat    Compat             `toml:"compat"`
	Plugins   map[string]*Plugin `toml:"plugins"`
	Sandbox   Sandbox            `toml:"sandbox"`
	Store     Store              `toml:"store"`
	Log       Log                `toml:"log"`
	Cluster   Cluster            `toml:"cluster"`
	Gateway   Gateway            `toml:"gateway"`
	// Harnesses are the agent harnesses a rollout may name: presets from
	// configs/harnesses.toml, and a deployment's own.
	Harnesses map[string]*Harness `toml:"harnesses"`
}

// Harness is an unmodified agent program trained through the gateway. It
// is installed once on the host into Dir (prorl-host harness install),
// shown read-only at HarnessInside in the sandboxes of its rollouts, and
// started there with Run (a bash command) and Env; it reaches the policy
// only through the gateway, at $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL
// with the session's key in $OPENAI_API_KEY and $ANTHROPIC_API_KEY, and
// gets the task in $PRORL_INSTRUCTION.
type Harness struct {
	Dir string `toml:"dir"`
	// Install is run on the host (argv; {dir} is Dir).
	Install []string          `toml:"install"`
	Run     string            `toml:"run"`
	Env     map[string]string `toml:"env"`
	// Timeout bounds one run of the harness (default 30m).
	Timeout Duration `toml:"timeout"`
}

// Cluster joins hosts into one service: nodes register with a
// coordinator (prorl-host coordinate), which the trainer talks to.
type Cluster struct {
	// Coordinator is the coordinator's URL a node joins ("": not a node).
	Coordinator string `toml:"coordinator"`
	// NodeID names this node (default: its host name and port).
	NodeID string `toml:"node_id"`
	// Advertise is the URL the coordinator reaches this node at (default:
	// http:// and the address it listens on).
	Advertise string `toml:"advertise"`
	// HeartbeatInterval is how often a node reports its load.
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	// DeadAfter is how long a coordinator waits for a node's heartbeat
	// before declaring it dead and running its rollouts elsewhere.
	DeadAfter Duration `toml:"dead_after"`
	// Workers bounds the rollouts a coordinator has out on nodes at once.
	Workers int `toml:"workers"`
	// AllowPlainHTTP lets a coordinator send its admin token to a node
	// registered with an http:// URL that is not loopback (default: such a
	// node is refused; use https:// or a private network and set this).
	AllowPlainHTTP bool `toml:"allow_plain_http"`
}

// Gateway bounds what one session's harness can make the host do.
type Gateway struct {
	// MaxConcurrentPerSession is how many of a session's calls (of any
	// endpoint) the host serves at once; more are answered 429 at once.
	MaxConcurrentPerSession int `toml:"max_concurrent_per_session"`
	// MaxRequestsPerSession bounds a session's calls that generate nothing
	// (token counts, model lists); 0: 32 plus 4 a turn of its budget.
	MaxRequestsPerSession int `toml:"max_requests_per_session"`
	// MaxConnections bounds the connections of the sandboxes' gateway
	// socket (and, in each sandbox, of its relay).
	MaxConnections int `toml:"max_connections"`
}

// HarnessInside is where a harness's Dir appears in its sandboxes.
const HarnessInside = "/tmp/.prorl-harness"

// Sandbox configures where rollouts run commands.
type Sandbox struct {
	// Driver is bwrap (bubblewrap), none (no isolation: opt in only for
	// domains that score text), or disabled (rollouts that need a sandbox fail).
	Driver string `toml:"driver"`
	// ImageDir holds images as ImageDir/NAME/rootfs (prorl-host sandbox
	// build-image); the image "host" is the host's /usr, read-only.
	ImageDir     string `toml:"image_dir"`
	DefaultImage string `toml:"default_image"`
	// WorkRoot holds the sandboxes' work directories; default data_dir/sandboxes.
	WorkRoot string `toml:"work_root"`
	// AgentBinary is the path of prorl-sandbox-agent, which runs in every
	// sandbox (not to be confused with [agent], the agent loop).
	AgentBinary         string   `toml:"agent_binary"`
	MaxStarting         int      `toml:"max_starting"`
	MaxStartingPerImage int      `toml:"max_starting_per_image"`
	ExecTimeout         Duration `toml:"exec_timeout"`
	// CPUSeconds, ProcessMemoryMiB (address space) and MaxFileMiB bind each
	// process; MemoryMiB (tmpfs included) and MaxProcesses the whole
	// sandbox where cgroups can be made; TmpMiB and WorkMiB size /tmp and
	// the work dir; MaxOutputKiB caps what one command returns.
	CPUSeconds       uint64 `toml:"cpu_seconds"`
	MemoryMiB        uint64 `toml:"memory_mib"`
	ProcessMemoryMiB uint64 `toml:"process_memory_mib"`
	MaxProcesses     uint64 `toml:"max_processes"`
	MaxFileMiB       uint64 `toml:"max_file_mib"`
	MaxOutputKiB     uint64 `toml:"max_output_kib"`
	TmpMiB           uint64 `toml:"tmp_mib"`
	WorkMiB          uint64 `toml:"work_mib"`
	// Seccomp is "default" or "off"; Cgroups is "auto", "required" or "off".
	Seccomp       string `toml:"seccomp"`
	Cgroups       string `toml:"cgroups"`
	ApptainerPath string `toml:"apptainer_path"`
	// ApptainerRootMode is how a root host runs Apptainer: "userns" (as root
	// with --userns) or "user" (rootless, as apptainer_user).
	ApptainerRootMode string `toml:"apptainer_root_mode"`
	ApptainerUser     string `toml:"apptainer_user"`
	// FaultStartRate fails this share of sandbox starts on purpose, as a
	// driver that cannot start one fails them: for fault drills and the
	// fault bench, never for training (0, the default, is off).
	FaultStartRate float64 `toml:"fault_start_rate"`
}

// Store configures where submissions and results are kept.
type Store struct {
	// Driver is bbolt (one durable file) or memory (lost with the host).
	Driver string `toml:"driver"`
	// Path of the bbolt file; default data_dir/prorl.db.
	Path string `toml:"path"`
	// OnRestart is what happens to rollouts a crash interrupted: rerun
	// (same id, attempt+1) or interrupted (reported failed).
	OnRestart string `toml:"on_restart"`
}

// SandboxDrivers are the drivers the host knows.
var SandboxDrivers = []string{"bwrap", "apptainer", "none", "disabled"}

// Server is the HTTP API.
type Server struct {
	Listen string `toml:"listen"`
	// AllowRemote must be set to listen on a non-loopback address, and
	// then a token is required unless Insecure says otherwise.
	AllowRemote  bool     `toml:"allow_remote"`
	Insecure     bool     `toml:"insecure"`
	MaxBodyBytes int64    `toml:"max_body_bytes"`
	MaxBatch     int      `toml:"max_batch"`
	MaxSamples   int      `toml:"max_samples"`
	MaxWait      Duration `toml:"max_wait"`
	// MaxPageBytes bounds one GET /v1/results page's results' JSON (one
	// result is always sent).
	MaxPageBytes    int64    `toml:"max_page_bytes"`
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// EvaluateTimeout bounds one POST /v1/evaluate (504 past it).
	EvaluateTimeout Duration `toml:"evaluate_timeout"`
	DataDir         string   `toml:"data_dir"`
	// ResultRetention bounds how many finished, unacknowledged results are kept.
	ResultRetention int `toml:"result_retention"`
	// IdempotencyTTL is how long an idempotency key (and a Polar task's
	// record) is kept: a retry within it gets the first submission back.
	IdempotencyTTL Duration `toml:"idempotency_ttl"`
	// Token, when set, is required as "Authorization: Bearer TOKEN" on the
	// API; AdminToken on the admin endpoints (backends, policy, cancel all,
	// the ProRL start/stop/server list). *File variants read them from files.
	Token          string `toml:"token"`
	TokenFile      string `toml:"token_file"`
	AdminToken     string `toml:"admin_token"`
	AdminTokenFile string `toml:"admin_token_file"`
	// MaxSubmissionBytes bounds what one submission (a group, a batch, a
	// Polar task) makes the host hold and write: every rollout's task,
	// metadata and instruction plus 1 KiB, summed. A group of n counts its
	// task n times: each sample's prompt and result carry it.
	MaxSubmissionBytes int64 `toml:"max_submission_bytes"`
	// AllowedHosts are the names the API answers to besides loopback
	// names, IP addresses and this machine's host name ("*": any). A
	// request naming another Host is refused: a web page cannot reach the
	// API by rebinding its own name to this machine.
	AllowedHosts []string `toml:"allowed_hosts"`
	// AllowedOrigins are the web origins (scheme://host[:port]) whose pages
	// may call the API besides its own (the dashboard); "*": any. A
	// request a browser sends from another page is refused.
	AllowedOrigins []string `toml:"allowed_origins"`
	// CallbackAllow are where Polar's callback_url may point: host names,
	// host:port, IP addresses or CIDR ranges. Default: nowhere (callbacks
	// are refused at submission).
	CallbackAllow []string `toml:"callback_allow"`
	// GCPercent is the Go GC target (GOGC). The host's heap is mostly
	// short-lived trajectories, so trading memory for fewer collections pays.
	GCPercent int `toml:"gc_percent"`
	// MemoryLimitMiB is a soft heap limit (GOMEMLIMIT); 0 means none.
	MemoryLimitMiB int64 `toml:"memory_limit_mib"`
}

// Pipeline sizes the three stages.
type Pipeline struct {
	InitWorkers    int      `toml:"init_workers"`
	RunWorkers     int      `toml:"run_workers"`
	EvalWorkers    int      `toml:"eval_workers"`
	InitQueue      int      `toml:"init_queue"`
	RunQueue       int      `toml:"run_queue"`
	EvalQueue      int      `toml:"eval_queue"`
	RolloutTimeout Duration `toml:"rollout_timeout"`
	// StuckAfter flags a rollout held in one stage this long (the
	// dashboard and prorl_rollouts_stuck).
	StuckAfter Duration `toml:"stuck_after"`
	// ExpectedTokensMemory is how many tasks' generated lengths the host
	// remembers: a rollout submitted without expected_tokens is started
	// and placed by what the task's earlier rollouts generated (0: off).
	ExpectedTokensMemory int `toml:"expected_tokens_memory"`
	// Retry is how a sample's infrastructure failures are run again.
	Retry Retry `toml:"retry"`
}

// Retry runs a sample that an infrastructure failure ended again, as a
// new attempt of the same rollout; a request may override each key.
type Retry struct {
	// Infra turns retries on for requests that do not say (retry_infra).
	Infra bool `toml:"infra"`
	// Budget is how many more attempts a sample may spend on each failure
	// reason (infrastructure reasons only; a reason not listed: none).
	Budget map[string]int `toml:"budget"`
	// Deadline bounds a sample's attempts: none starts, or runs, later
	// than its first attempt's start plus this. 0: three times the
	// rollout's timeout.
	Deadline Duration `toml:"deadline"`
}

// MaxRetryBudget bounds one reason's budget: a budget without a cap is how
// one run wedged (NeMo-RL#3666).
const MaxRetryBudget = 10

// Agent holds the defaults of the multi-turn loop.
type Agent struct {
	MaxTurns         int    `toml:"max_turns"`
	MaxTokensPerTurn int    `toml:"max_tokens_per_turn"`
	MaxTotalTokens   int    `toml:"max_total_tokens"`
	ToolCallFormat   string `toml:"tool_call_format"`
	// ToolTimeout bounds one tool call through the plugin.
	ToolTimeout Duration `toml:"tool_timeout"`
}

// Tokenizer chooses where prompts are tokenised.
type Tokenizer struct {
	// ModelDir is a Hugging Face model directory (tokenizer.json,
	// tokenizer_config.json, optional chat_template.jinja and
	// generation_config.json). Empty: the backend's /tokenize and
	// /detokenize (vllm protocol only).
	ModelDir string `toml:"model_dir"`
	// ChatTemplate is a file that replaces the model's chat template.
	ChatTemplate string `toml:"chat_template"`
	// ChatTemplateName picks one of the model's named templates; empty:
	// "tool_use" for renders with tools when the model has it, else
	// "default" (as transformers chooses).
	ChatTemplateName string `toml:"chat_template_name"`
	// ArgumentsAsString passes tool-call arguments to the template as the
	// JSON string the model wrote (DeepSeek V3); default: parsed, as vLLM.
	ArgumentsAsString bool `toml:"arguments_as_string"`
	// NullContentWithToolCalls passes content None on assistant turns that
	// only call tools (DeepSeek V3).
	NullContentWithToolCalls bool `toml:"null_content_with_tool_calls"`
	// ChatFormat is "template" (the model's chat template, the default) or
	// "harmony" (OpenAI's harmony format, for GPT-OSS, rendered as the
	// openai-harmony library does, which is how vLLM renders GPT-OSS).
	ChatFormat string `toml:"chat_format"`
	// ReasoningEffort is harmony's "Reasoning:" (low, medium, high;
	// default medium); a request's template kwarg reasoning_effort wins.
	ReasoningEffort string `toml:"reasoning_effort"`
	// ConversationDate is harmony's "Current date:" (YYYY-MM-DD); empty:
	// none. A fixed date keeps a run's prompts (and their cache) stable.
	ConversationDate string `toml:"conversation_date"`
	// Check renders the whole conversation after every turn and records in
	// the trajectory's metrics whether the template reproduces the tokens
	// kept ("every_turn", the default, or "off").
	Check string `toml:"check"`
}

// Backends configures inference backends.
type Backends struct {
	HealthInterval Duration `toml:"health_interval"`
	RequestTimeout Duration `toml:"request_timeout"`
	WaitForBackend Duration `toml:"wait_for_backend"`
	// IdleConnTimeout closes pooled backend connections unused this long.
	IdleConnTimeout Duration `toml:"idle_conn_timeout"`
	// CacheSaltPerPolicy salts every generation's prefix cache with its
	// policy version (vLLM's cache_salt, SGLang's extra_key), so tokens of
	// a new version are never computed from an old version's KV when the
	// server keeps its cache across a weight update.
	CacheSaltPerPolicy bool `toml:"cache_salt_per_policy"`
	// Routing places rollouts and requests on backends: sticky (default),
	// group-aware, prorl, consistent-hash, round-robin, least-requests.
	Routing string `toml:"routing"`
	// MigrateMaxTokens bounds the context a request waiting for a slot may
	// take to another backend with room (moving prefills it there again).
	// 0, the default: any (in the SWE-like bench a bound of 4096 made no
	// difference beyond run-to-run noise).
	MigrateMaxTokens int `toml:"migrate_max_tokens"`
	// CacheOvercommit: new rollouts start on a backend with cache_tokens
	// while the contexts of those active there fit cache_tokens times
	// this (at least 1; default 1.5). Rollouts in tool calls need not stay
	// cached; counting them in full idled slots (backend.DefaultCacheOvercommit).
	CacheOvercommit float64 `toml:"cache_overcommit"`
	// Evacuate: at a step's tail, a slower backend's generations are
	// aborted with their tokens kept and continue on faster backends with
	// free slots (backends with slots and a pause API; default true).
	Evacuate bool      `toml:"evacuate"`
	Static   []Backend `toml:"static"`
}

// Backend is one inference server.
type Backend struct {
	URL            string `toml:"url"`
	Protocol       string `toml:"protocol"`
	Model          string `toml:"model"`
	MaxConcurrency int    `toml:"max_concurrency"`
	// Slots is the server's batch size (vLLM's --max-num-seqs): requests
	// beyond it wait in the host for the first free slot on any backend
	// instead of in this server's queue. 0: no limit.
	Slots int `toml:"slots"`
	// CacheTokens is the server's KV cache in tokens (vLLM logs "GPU KV
	// cache size: N tokens"): rollouts start on it only while their
	// contexts fit, so they do not evict each other between turns. 0: no limit.
	CacheTokens int `toml:"cache_tokens"`
	// Weight is the backend's capacity relative to the others (default 1).
	Weight float64 `toml:"weight"`
}

// Compat configures the ProRL-compatible endpoints.
type Compat struct {
	// Protocol of servers added with /add_llm_server.
	Protocol string `toml:"protocol"`
	Model    string `toml:"model"`
	// StartOnBoot makes the compat server "running" without a /start call.
	StartOnBoot bool `toml:"start_on_boot"`
}

// Plugin is one [plugins.NAME] table.
type Plugin struct {
	Enabled      bool              `toml:"enabled"`
	Path         string            `toml:"path"`
	SHA256       string            `toml:"sha256"`
	Args         []string          `toml:"args"`
	Env          map[string]string `toml:"env"`
	StartTimeout Duration          `toml:"start_timeout"`
	// MaxRestarts within RestartWindow before the domain is marked unhealthy.
	MaxRestarts   int            `toml:"max_restarts"`
	RestartWindow Duration       `toml:"restart_window"`
	Config        map[string]any `toml:"config"`
}

// Log configures host logging.
type Log struct {
	Level string `toml:"level"`
	JSON  bool   `toml:"json"`
}

// Protocols are the backend protocols the host speaks.
var Protocols = []string{"vllm", "generate", "sglang"}

// NeedsLocalTokenizer: protocols without a chat tokenizer endpoint, usable
// only with [tokenizer] model_dir.
func NeedsLocalTokenizer(protocol string) bool { return protocol == "sglang" }

// ToolCallFormats are the tool-call formats the host parses (core/toolcall's
// Formats, which a test there keeps equal: config sits below the engines).
var ToolCallFormats = []string{"hermes", "llama3_json", "qwen3_coder", "kimi_k2", "deepseek_v31", "deepseek_v3", "mistral", "glm45", "minimax_m2", "harmony"}

// AddHarnesses adds preset harnesses (a TOML document of [harnesses.*]
// tables) that the configuration does not define itself.
func (c *Config) AddHarnesses(data []byte, name string) error {
	vars := Vars{ExeDir: exeDir(), CacheDir: cacheDir()}
	var doc struct {
		Harnesses map[string]*Harness `toml:"harnesses"`
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&doc)
	if err != nil {
		return parseError(name, err)
	}
	if err := undecoded(md, data, name); err != nil {
		return err
	}
	if c.Harnesses == nil {
		c.Harnesses = map[string]*Harness{}
	}
	for n, h := range doc.Harnesses {
		if _, own := c.Harnesses[n]; own || h == nil {
			continue
		}
		h.Dir = expand(h.Dir, vars)
		c.Harnesses[n] = h
	}
	return c.Validate()
}

// Routings are the backend routings (backend.Routings; the default first).
var Routings = []string{"sticky", "group-aware", "prorl", "consistent-hash", "round-robin", "least-requests"}

// Default returns the configuration with every default set.
func Default() *Config {
	return &Config{
		Server: Server{
			Listen: "127.0.0.1:8006", MaxBodyBytes: 8 << 20, MaxPageBytes: 64 << 20, MaxBatch: 10000, MaxSamples: 1024, MaxSubmissionBytes: 128 << 20,
			MaxWait: Duration{60 * time.Second}, ShutdownTimeout: Duration{30 * time.Second}, EvaluateTimeout: Duration{5 * time.Minute}, DataDir: ".data",
			ResultRetention: 1_000_000, GCPercent: 200, IdempotencyTTL: Duration{24 * time.Hour},
		},
		Pipeline: Pipeline{
			InitWorkers: 64, RunWorkers: 1024, EvalWorkers: 64,
			InitQueue: 100_000, RunQueue: 4096, EvalQueue: 4096,
			RolloutTimeout: Duration{30 * time.Minute}, StuckAfter: Duration{10 * time.Minute},
			ExpectedTokensMemory: 1 << 18,
			Retry: Retry{Infra: true, Budget: map[string]int{
				"backend_unavailable": 2, "sandbox_failed": 2, "plugin_crashed": 2, "interrupted": 2,
				"eval_failed": 1, "tool_error": 1, "internal": 1, "timeout": 0}},
		},
		Agent:     Agent{MaxTurns: 8, MaxTokensPerTurn: 2048, MaxTotalTokens: 32768, ToolCallFormat: "hermes", ToolTimeout: Duration{5 * time.Minute}},
		Tokenizer: Tokenizer{Check: "every_turn"},
		Cluster:   Cluster{HeartbeatInterval: Duration{time.Second}, DeadAfter: Duration{10 * time.Second}, Workers: 65536},
		Gateway:   Gateway{MaxConcurrentPerSession: 8, MaxConnections: 1024},
		Backends: Backends{
			HealthInterval: Duration{5 * time.Second}, RequestTimeout: Duration{10 * time.Minute}, WaitForBackend: Duration{60 * time.Second},
			Evacuate: true, CacheOvercommit: 1.5, // backend.DefaultCacheOvercommit (TestDefaultsMatchPool)
		},
		Compat: Compat{Protocol: "vllm"},
		Sandbox: Sandbox{Driver: "bwrap", ImageDir: "{cache_dir}/prorl/images", DefaultImage: "host", AgentBinary: "{exe_dir}/prorl-sandbox-agent",
			MaxStarting: 16, MaxStartingPerImage: 8, ExecTimeout: Duration{30 * time.Second},
			// 256 sandboxes at these limits fit a 64 GiB node; a domain asks for more in its spec.
			CPUSeconds: 600, MemoryMiB: 256, ProcessMemoryMiB: 4096, MaxProcesses: 128, MaxFileMiB: 1024, MaxOutputKiB: 1024,
			TmpMiB: 64, WorkMiB: 256, Seccomp: "default", Cgroups: "auto", ApptainerRootMode: "userns", ApptainerUser: "nobody"},
		Plugins: map[string]*Plugin{},
		Store:   Store{Driver: "bbolt", OnRestart: "rerun"},
		Log:     Log{Level: "info"},
	}
}

// Vars expand {config_dir}, {exe_dir} and {cache_dir} in paths.
type Vars struct {
	ConfigDir string
	ExeDir    string
	CacheDir  string // ~/.cache, or /var/cache when running as root
}

// cacheDir is ~/.cache, or /var/cache for a host running as root: a root
// host's sandboxes run as their own uids and cannot enter /root.
func cacheDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache"
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return os.TempDir()
	}
	return d
}

// Load reads a config file and its overlays (OverlayDir).
func Load(path string) (*Config, error) { return LoadWith(path, nil, nil) }

func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}

// Parse decodes, defaults and validates a config document.
func Parse(data []byte, name string, vars Vars) (*Config, error) {
	cfg := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(cfg)
	if err != nil {
		return nil, parseError(name, err)
	}
	if err := undecoded(md, data, name); err != nil {
		return nil, err
	}
	for n, p := range cfg.Plugins {
		if p == nil {
			continue
		}
		if !md.IsDefined("plugins", n, "start_timeout") {
			p.StartTimeout = Duration{10 * time.Second}
		}
		if !md.IsDefined("plugins", n, "max_restarts") {
			p.MaxRestarts = 5
		}
		if !md.IsDefined("plugins", n, "restart_window") {
			p.RestartWindow = Duration{time.Minute}
		}
		p.Path = expand(p.Path, vars)
		// Plugin tables hold paths too (an image directory): the same
		// variables expand in their string values.
		expandStrings(p.Config, vars)
	}
	for _, h := range cfg.Harnesses {
		if h != nil {
			h.Dir = expand(h.Dir, vars)
		}
	}
	cfg.Server.DataDir = expand(cfg.Server.DataDir, vars)
	for _, t := range []struct {
		file *string
		val  *string
		key  string
	}{{&cfg.Server.TokenFile, &cfg.Server.Token, "server.token_file"}, {&cfg.Server.AdminTokenFile, &cfg.Server.AdminToken, "server.admin_token_file"}} {
		if *t.file == "" {
			continue
		}
		b, err := os.ReadFile(expand(*t.file, vars))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, t.key, err)
		}
		// An empty file would silently open the API: refused.
		if *t.val = strings.TrimSpace(string(b)); *t.val == "" {
			return nil, fmt.Errorf("%s: %s: %s is empty", name, t.key, expand(*t.file, vars))
		}
	}
	cfg.Sandbox.ImageDir = expand(cfg.Sandbox.ImageDir, vars)
	cfg.Tokenizer.ModelDir = expand(cfg.Tokenizer.ModelDir, vars)
	cfg.Tokenizer.ChatTemplate = expand(cfg.Tokenizer.ChatTemplate, vars)
	if cfg.Store.Path == "" {
		cfg.Store.Path = filepath.Join(cfg.Server.DataDir, "prorl.db")
	} else {
		cfg.Store.Path = expand(cfg.Store.Path, vars)
	}
	cfg.Sandbox.AgentBinary = expand(cfg.Sandbox.AgentBinary, vars)
	if cfg.Sandbox.WorkRoot == "" {
		cfg.Sandbox.WorkRoot = filepath.Join(cfg.Server.DataDir, "sandboxes")
	} else {
		cfg.Sandbox.WorkRoot = expand(cfg.Sandbox.WorkRoot, vars)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return cfg, nil
}

func parseError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		if pe.LastKey != "" {
			return fmt.Errorf("%s:%d: %s: %s", name, pe.Position.Line, pe.LastKey, pe.Message)
		}
		return fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// undecoded names every key no config field takes (a plugin's own config
// table is the plugin's to check).
func undecoded(md toml.MetaData, data []byte, name string) error {
	var msgs []string
	for _, k := range md.Undecoded() {
		if isUnderPluginConfig(k) {
			continue
		}
		msg := fmt.Sprintf("%s:%d: unknown key %q", name, keyLine(data, k), k.String())
		if hint, ok := renamed[k.String()]; ok {
			msg += " (" + hint + ")"
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "\n"))
	}
	return nil
}

// renamed are keys of earlier versions and what replaced them.
var renamed = map[string]string{
	"sandbox.agent": "renamed agent_binary: the path of prorl-sandbox-agent; [agent] is the agent loop",
}

func isUnderPluginConfig(k toml.Key) bool {
	return len(k) >= 3 && k[0] == "plugins" && k[2] == "config"
}

func expand(p string, v Vars) string {
	p = expandVars(p, v)
	if p != "" && !filepath.IsAbs(p) && v.ConfigDir != "" {
		p = filepath.Join(v.ConfigDir, p)
	}
	return p
}

// FieldError names the config key at fault.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

func fe(key, format string, args ...any) error {
	return &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks every value.
func (c *Config) Validate() error {
	k := &checker{}
	for _, check := range []func(*checker){c.checkServer, c.checkPipeline, c.checkCluster, c.checkTokenizer, c.checkBackends, c.checkPlugins, c.checkSandbox} {
		check(k)
	}
	return errors.Join(k.errs...)
}

// checker gathers a config's problems, each naming its key.
type checker struct{ errs []error }

func (k *checker) add(key, format string, args ...any) {
	k.errs = append(k.errs, fe(key, format, args...))
}

func (k *checker) pos(key string, v int) {
	if v <= 0 {
		k.add(key, "must be positive, got %d", v)
	}
}

func (k *checker) nonNeg(key string, v float64) {
	if v < 0 {
		k.add(key, "must not be negative")
	}
}

// checkServer checks the [server] table (and the limits beside it).
func (c *Config) checkServer(k *checker) {
	host, _, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		k.add("server.listen", "%v", err)
	} else if !c.Server.AllowRemote && !isLoopback(host) {
		k.add("server.listen", "%q is not a loopback address; set server.allow_remote = true to expose the API", c.Server.Listen)
	}
	if c.Server.AllowRemote && c.Server.Token == "" && c.Server.AdminToken == "" && !c.Server.Insecure {
		k.add("server.allow_remote", "exposing the API without a token: set server.token_file (and admin_token_file), or server.insecure = true to accept an open API")
	}
	k.pos("server.max_batch", c.Server.MaxBatch)
	k.pos("server.max_samples", c.Server.MaxSamples)
	k.pos("server.result_retention", c.Server.ResultRetention)
	k.pos("server.gc_percent", c.Server.GCPercent)
	k.nonNeg("pipeline.expected_tokens_memory", float64(c.Pipeline.ExpectedTokensMemory))
	k.nonNeg("backends.migrate_max_tokens", float64(c.Backends.MigrateMaxTokens))
	if !(c.Backends.CacheOvercommit >= 1) { // NaN too
		k.add("backends.cache_overcommit", "must be at least 1, got %g", c.Backends.CacheOvercommit)
	}
	k.nonNeg("server.memory_limit_mib", float64(c.Server.MemoryLimitMiB))
	if c.Server.MaxBodyBytes <= 0 {
		k.add("server.max_body_bytes", "must be positive")
	}
	if c.Server.MaxPageBytes <= 0 {
		k.add("server.max_page_bytes", "must be positive")
	}
	if c.Server.MaxSubmissionBytes <= 0 {
		k.add("server.max_submission_bytes", "must be positive")
	}
	for i, h := range c.Server.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			k.add(fmt.Sprintf("server.allowed_hosts[%d]", i), "must be a host name (optionally with :port) or \"*\", got %q", h)
		}
	}
	for i, o := range c.Server.AllowedOrigins {
		if u, err := url.Parse(o); o != "*" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "") {
			k.add(fmt.Sprintf("server.allowed_origins[%d]", i), "must be an origin like https://example.org:8080, or \"*\", got %q", o)
		}
	}
	for i, a := range c.Server.CallbackAllow {
		if _, err := egress.NewPolicy([]string{a}); err != nil || a == "*" {
			k.add(fmt.Sprintf("server.callback_allow[%d]", i), "must be a host name, host:port, IP address or CIDR range, got %q", a)
		}
	}
}

// checkPipeline checks the gateway, pipeline and agent limits.
func (c *Config) checkPipeline(k *checker) {
	k.pos("gateway.max_concurrent_per_session", c.Gateway.MaxConcurrentPerSession)
	k.pos("gateway.max_connections", c.Gateway.MaxConnections)
	k.nonNeg("gateway.max_requests_per_session", float64(c.Gateway.MaxRequestsPerSession))
	if c.Server.IdempotencyTTL.Duration < time.Second {
		k.add("server.idempotency_ttl", "must be at least 1s")
	}
	k.pos("pipeline.init_workers", c.Pipeline.InitWorkers)
	k.pos("pipeline.run_workers", c.Pipeline.RunWorkers)
	k.pos("pipeline.eval_workers", c.Pipeline.EvalWorkers)
	k.pos("pipeline.init_queue", c.Pipeline.InitQueue)
	k.pos("pipeline.run_queue", c.Pipeline.RunQueue)
	k.pos("pipeline.eval_queue", c.Pipeline.EvalQueue)
	k.pos("agent.max_turns", c.Agent.MaxTurns)
	k.pos("agent.max_tokens_per_turn", c.Agent.MaxTokensPerTurn)
	k.pos("agent.max_total_tokens", c.Agent.MaxTotalTokens)
	if c.Server.EvaluateTimeout.Duration <= 0 {
		k.add("server.evaluate_timeout", "must be positive")
	}
	if c.Pipeline.RolloutTimeout.Duration <= 0 {
		k.add("pipeline.rollout_timeout", "must be positive")
	}
	if r := c.Sandbox.FaultStartRate; r < 0 || r > 1 {
		k.add("sandbox.fault_start_rate", "must be between 0 and 1")
	}
	if c.Pipeline.Retry.Deadline.Duration < 0 {
		k.add("pipeline.retry.deadline", "must not be negative")
	}
	for _, reason := range slices.Sorted(maps.Keys(c.Pipeline.Retry.Budget)) {
		if msg := CheckRetryBudget(reason, c.Pipeline.Retry.Budget[reason]); msg != "" {
			k.add("pipeline.retry.budget."+reason, "%s", msg)
		}
	}
}

// RetryReasons are the failure reasons a sample may be retried for: the
// infrastructure's, never the policy's (trajectory.SampleOf).
var RetryReasons = []string{"backend_unavailable", "sandbox_failed", "plugin_crashed", "interrupted", "eval_failed", "tool_error", "internal", "timeout"}

// CheckRetryBudget says what is wrong with one reason's budget, or "".
func CheckRetryBudget(reason string, n int) string {
	switch {
	case !slices.Contains(RetryReasons, reason):
		return "not an infrastructure failure reason (one of " + strings.Join(RetryReasons, ", ") + ")"
	case n < 0 || n > MaxRetryBudget:
		return fmt.Sprintf("must be between 0 and %d", MaxRetryBudget)
	}
	return ""
}

// checkCluster checks the [cluster] table.
func (c *Config) checkCluster(k *checker) {
	if cl := c.Cluster; cl.Coordinator != "" {
		if u, err := url.Parse(cl.Coordinator); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			k.add("cluster.coordinator", "must be an http(s)://host:port URL, not %q", cl.Coordinator)
		}
	}
	if c.Cluster.HeartbeatInterval.Duration <= 0 || c.Cluster.DeadAfter.Duration < 2*c.Cluster.HeartbeatInterval.Duration {
		k.add("cluster.dead_after", "must be at least twice cluster.heartbeat_interval (%s), got %s", c.Cluster.HeartbeatInterval.Duration, c.Cluster.DeadAfter.Duration)
	}
	if c.Cluster.Workers < 1 {
		k.add("cluster.workers", "must be positive")
	}
}

// checkTokenizer checks the tokenizer, harnesses, tool-call format and compatibility protocol.
func (c *Config) checkTokenizer(k *checker) {
	if !oneOf(c.Tokenizer.ChatFormat, []string{"", "template", "harmony"}) {
		k.add("tokenizer.chat_format", "must be template or harmony, not %q", c.Tokenizer.ChatFormat)
	}
	if !oneOf(c.Tokenizer.ReasoningEffort, []string{"", "low", "medium", "high"}) {
		k.add("tokenizer.reasoning_effort", "must be low, medium or high, not %q", c.Tokenizer.ReasoningEffort)
	}
	if d := c.Tokenizer.ConversationDate; d != "" {
		if _, err := time.Parse("2006-01-02", d); err != nil {
			k.add("tokenizer.conversation_date", "must be YYYY-MM-DD, not %q", d)
		}
	}
	if c.Tokenizer.ChatFormat == "harmony" && c.Tokenizer.ChatTemplate != "" {
		k.add("tokenizer.chat_template", "is not used with chat_format = \"harmony\"")
	}
	if !oneOf(c.Tokenizer.Check, []string{"every_turn", "off"}) {
		k.add("tokenizer.check", "must be every_turn or off, not %q", c.Tokenizer.Check)
	}
	if c.Tokenizer.ModelDir != "" {
		if _, err := os.Stat(filepath.Join(c.Tokenizer.ModelDir, "tokenizer.json")); err != nil {
			k.add("tokenizer.model_dir", "no tokenizer.json in %s", c.Tokenizer.ModelDir)
		}
	} else if c.Tokenizer.ChatTemplate != "" {
		k.add("tokenizer.chat_template", "needs tokenizer.model_dir")
	}
	for name, h := range c.Harnesses {
		switch {
		case h == nil:
		case !filepath.IsAbs(h.Dir):
			k.add("harnesses."+name+".dir", "must be an absolute path, got %q", h.Dir)
		case strings.TrimSpace(h.Run) == "":
			k.add("harnesses."+name+".run", "required: the command that starts the harness")
		}
	}
	if !oneOf(c.Agent.ToolCallFormat, ToolCallFormats) {
		k.add("agent.tool_call_format", "unknown format %q (known: %s)", c.Agent.ToolCallFormat, strings.Join(ToolCallFormats, ", "))
	}
	if !oneOf(c.Compat.Protocol, Protocols) {
		k.add("compat.protocol", "unknown protocol %q (known: %s)", c.Compat.Protocol, strings.Join(Protocols, ", "))
	} else if NeedsLocalTokenizer(c.Compat.Protocol) && c.Tokenizer.ModelDir == "" {
		k.add("compat.protocol", "%s has no chat tokenizer: set tokenizer.model_dir", c.Compat.Protocol)
	}
}

// checkBackends checks the [backends] table.
func (c *Config) checkBackends(k *checker) {
	if c.Backends.Routing == "" {
		c.Backends.Routing = Routings[0]
	} else if !oneOf(c.Backends.Routing, Routings) {
		k.add("backends.routing", "unknown routing %q (known: %s)", c.Backends.Routing, strings.Join(Routings, ", "))
	}
	if c.Backends.HealthInterval.Duration <= 0 {
		k.add("backends.health_interval", "must be positive")
	}
	for i, b := range c.Backends.Static {
		key := fmt.Sprintf("backends.static[%d]", i)
		if b.URL == "" {
			k.add(key+".url", "required")
		} else if _, err := baseurl.Parse(b.URL); err != nil {
			k.add(key+".url", "%v", err)
		}
		k.nonNeg(key+".weight", b.Weight)
		k.nonNeg(key+".slots", float64(b.Slots))
		k.nonNeg(key+".cache_tokens", float64(b.CacheTokens))
		if b.Protocol == "" {
			c.Backends.Static[i].Protocol = "vllm"
		} else if !oneOf(b.Protocol, Protocols) {
			k.add(key+".protocol", "unknown protocol %q", b.Protocol)
		} else if NeedsLocalTokenizer(b.Protocol) && c.Tokenizer.ModelDir == "" {
			k.add(key+".protocol", "%s has no chat tokenizer: set tokenizer.model_dir", b.Protocol)
		}
	}
}

// checkPlugins checks the enabled plugins.
func (c *Config) checkPlugins(k *checker) {
	for name, p := range c.Plugins {
		key := "plugins." + name
		if p == nil || !p.Enabled {
			continue
		}
		if p.Path == "" {
			k.add(key+".path", "required for an enabled plugin")
		}
		if p.SHA256 != "" {
			if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != 32 {
				k.add(key+".sha256", "must be 64 hex digits")
			}
		}
		if p.StartTimeout.Duration <= 0 {
			k.add(key+".start_timeout", "must be positive")
		}
		for v := range p.Env {
			if v == "" || strings.Contains(v, "=") {
				k.add(key+".env", "bad variable name %q", v)
			}
		}
	}
}

// checkSandbox checks the sandbox, store and log tables.
func (c *Config) checkSandbox(k *checker) {
	if !oneOf(c.Sandbox.Driver, SandboxDrivers) {
		k.add("sandbox.driver", "unknown driver %q (known: %s)", c.Sandbox.Driver, strings.Join(SandboxDrivers, ", "))
	}
	if d := c.Store.Driver; d != "bbolt" && d != "memory" {
		k.add("store.driver", "must be bbolt or memory, got %q", d)
	}
	if o := c.Store.OnRestart; o != "rerun" && o != "interrupted" {
		k.add("store.on_restart", "must be rerun or interrupted, got %q", o)
	}
	if m := c.Sandbox.Seccomp; m != "default" && m != "off" {
		k.add("sandbox.seccomp", "must be default or off, got %q", m)
	}
	if m := c.Sandbox.Cgroups; m != "auto" && m != "required" && m != "off" {
		k.add("sandbox.cgroups", "must be auto, required or off, got %q", m)
	}
	if m := c.Sandbox.ApptainerRootMode; m != "user" && m != "userns" {
		k.add("sandbox.apptainer_root_mode", "must be userns or user, got %q", m)
	}
	k.pos("sandbox.max_starting", c.Sandbox.MaxStarting)
	k.pos("sandbox.max_starting_per_image", c.Sandbox.MaxStartingPerImage)
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		k.add("log.level", "unknown level %q", c.Log.Level)
	}
}

// EnabledPlugins returns the enabled plugins by name.
func (c *Config) EnabledPlugins() map[string]*Plugin {
	out := map[string]*Plugin{}
	for n, p := range c.Plugins {
		if p != nil && p.Enabled {
			out[n] = p
		}
	}
	return out
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// keyLine finds the line where a key is set, for error messages; the TOML
// library keeps key positions private.
func keyLine(data []byte, key toml.Key) int {
	want := key.String()
	var table []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		if strings.HasPrefix(s, "[") {
			h := strings.Trim(strings.SplitN(s, "#", 2)[0], " []")
			table = splitKey(h)
			if strings.Join(table, ".") == want {
				return line
			}
			continue
		}
		if i := strings.IndexByte(s, '='); i > 0 {
			full := append(append([]string{}, table...), splitKey(s[:i])...)
			if strings.Join(full, ".") == want {
				return line
			}
		}
	}
	return 0
}

func splitKey(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ".") {
		out = append(out, strings.Trim(strings.TrimSpace(p), `"'`))
	}
	return out
}

// expandVars replaces the variables only (no path resolution: plugin
// config strings are not all paths).
func expandVars(p string, v Vars) string {
	p = strings.ReplaceAll(p, "{config_dir}", v.ConfigDir)
	p = strings.ReplaceAll(p, "{exe_dir}", v.ExeDir)
	if strings.Contains(p, "{cache_dir}") {
		if v.CacheDir == "" {
			v.CacheDir = cacheDir()
		}
		p = strings.ReplaceAll(p, "{cache_dir}", v.CacheDir)
	}
	return p
}

// expandStrings expands {config_dir}, {exe_dir} and {cache_dir} in every
// string of a plugin's config table, nested tables and lists included.
func expandStrings(m map[string]any, vars Vars) {
	for k, v := range m {
		m[k] = expandValue(v, vars)
	}
}

func expandValue(v any, vars Vars) any {
	switch x := v.(type) {
	case string:
		return expandVars(x, vars)
	case map[string]any:
		expandStrings(x, vars)
	case []any:
		for i := range x {
			x[i] = expandValue(x[i], vars)
		}
	}
	return v
}

// SetDataDir moves server.data_dir (a command-line override, e.g. one per
// node of a shared file system), and with it the store file and the
// sandboxes' work root where they were data_dir's defaults.
func (c *Config) SetDataDir(dir string) {
	old := c.Server.DataDir
	c.Server.DataDir = dir
	if c.Store.Path == filepath.Join(old, "prorl.db") {
		c.Store.Path = filepath.Join(dir, "prorl.db")
	}
	if c.Sandbox.WorkRoot == filepath.Join(old, "sandboxes") {
		c.Sandbox.WorkRoot = filepath.Join(dir, "sandboxes")
	}
}

// Admin is the token the admin endpoints take: the admin token, or without
// one the deployment's token.
func (s Server) Admin() string {
	if s.AdminToken != "" {
		return s.AdminToken
	}
	return s.Token
}
