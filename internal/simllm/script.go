package simllm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"

	json "github.com/goccy/go-json"
)

// Script is what the simulated policy plays for one task: tool calls in
// order, then the final answer (through the finish tool when the domain
// offers one, else as text). Wrong is played instead in the rollouts drawn
// wrong (Options.CorrectRate); without it every rollout plays right.
// The simulator knows nothing of domains: what a task needs is all here.
type Script struct {
	// Key finds the task: the first user message of its prompt is the key,
	// starts with it, or (keys of 20 characters or more) contains it.
	Key string `json:"key"`
	Play
	Wrong *Play `json:"wrong,omitempty"`
	// CorrectRate, when set, replaces Options.CorrectRate for this task
	// (tasks of different difficulty: some always solved, some never).
	CorrectRate *float64 `json:"correct_rate,omitempty"`
}

// Play is one way through a task.
type Play struct {
	Calls []Call `json:"calls,omitempty"`
	Final string `json:"final"`
}

// Call is one tool call of a script; Arguments is a JSON object.
type Call struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Check says what is wrong with a script, naming the field.
func (s *Script) Check() error {
	if strings.TrimSpace(s.Key) == "" {
		return fmt.Errorf("key: empty (the text of the task's first user message)")
	}
	if r := s.CorrectRate; r != nil && (*r < 0 || *r > 1) {
		return fmt.Errorf("correct_rate: %v is not in [0, 1]", *r)
	}
	plays := map[string]*Play{"": &s.Play, "wrong.": s.Wrong}
	for prefix, p := range plays {
		if p == nil {
			continue
		}
		for i, c := range p.Calls {
			if c.Tool == "" {
				return fmt.Errorf("%scalls[%d].tool: empty", prefix, i)
			}
			if len(c.Arguments) == 0 {
				p.Calls[i].Arguments = json.RawMessage("{}")
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
				return fmt.Errorf("%scalls[%d].arguments: not a JSON object", prefix, i)
			}
		}
	}
	return nil
}

// LoadScripts reads JSONL scripts, strictly: an unknown field or a bad
// value is an error naming the line, never a script silently ignored.
func LoadScripts(path string) ([]Script, error) { return ReadJSONL(path, ParseScript) }

// ReadJSONL parses each non-blank line of a file with parse; an error
// names the file and line.
func ReadJSONL[T any](path string, parse func([]byte) (T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		v, err := parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// ParseScript decodes one script strictly and checks it.
func ParseScript(raw []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, err
	}
	if err := s.Check(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// scriptBook finds a task's script by its first user message.
type scriptBook struct {
	exact map[string]*Script
	keys  []string // longest first
}

func newScriptBook(scripts []Script) *scriptBook {
	b := &scriptBook{exact: map[string]*Script{}}
	for i := range scripts {
		k := strings.TrimSpace(scripts[i].Key)
		b.exact[k] = &scripts[i]
	}
	for k := range b.exact {
		b.keys = append(b.keys, k)
	}
	sort.Slice(b.keys, func(i, j int) bool {
		if len(b.keys[i]) != len(b.keys[j]) {
			return len(b.keys[i]) > len(b.keys[j])
		}
		return b.keys[i] < b.keys[j]
	})
	return b
}

// find: the message itself, else the longest key it starts with (domains
// append options and instructions), else the longest of 20 characters or
// more it contains (prompts quote the task inside a template).
func (b *scriptBook) find(q string) *Script {
	q = strings.TrimSpace(q)
	if s, ok := b.exact[q]; ok {
		return s
	}
	for _, k := range b.keys {
		if strings.HasPrefix(q, k) {
			return b.exact[k]
		}
	}
	for _, k := range b.keys {
		if len(k) >= 20 && strings.Contains(q, k) {
			return b.exact[k]
		}
	}
	return nil
}

// offeredTools reads the tools block of a rendered prompt (Hermes style,
// as Qwen's and the simulator's templates write it): one JSON object per
// line between <tools> and </tools>.
func offeredTools(text string) []toolSpec {
	// The block, not the instructions' mention of "<tools></tools>".
	i := strings.Index(text, "<tools>\n")
	if i < 0 {
		return nil
	}
	block := text[i+len("<tools>\n"):]
	if j := strings.Index(block, "</tools>"); j >= 0 {
		block = block[:j]
	}
	var out []toolSpec
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var t struct {
			Function *toolSpec `json:"function"`
			toolSpec
		}
		if json.Unmarshal([]byte(line), &t) != nil {
			continue
		}
		if t.Function != nil {
			out = append(out, *t.Function)
		} else if t.Name != "" {
			out = append(out, t.toolSpec)
		}
	}
	return out
}

type toolSpec struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}
