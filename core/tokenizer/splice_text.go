package tokenizer

import (
	"fmt"
	"strings"

	"github.com/prorl/prorl/core/trajectory"
)

// TextTokenizer is a tokenizer that renders templates to text and encodes
// text itself (the Go tokenizer). The splicer then works on text: exact,
// and without one tokenise call per placeholder.
type TextTokenizer interface {
	Tokenizer
	RenderText(msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) (string, error)
	EncodeText(s string) []int
	// TokenText is an added token's text ("" for ordinary tokens).
	TokenText(id int) string
	// StopIDs are the model's end-of-generation tokens.
	StopIDs() []int
	AppendBytes(dst []byte, ids []int) []byte
}

// EncodeText implements TextTokenizer.
func (l *Local) EncodeText(s string) []int { return l.tok.Encode(s) }

// TokenText implements TextTokenizer.
func (l *Local) TokenText(id int) string {
	if l.tok.IsAdded(id) {
		return l.tok.Piece(id)
	}
	return ""
}

// AppendBytes implements TextTokenizer.
func (l *Local) AppendBytes(dst []byte, ids []int) []byte { return l.tok.AppendBytes(dst, ids) }

// assistantMark stands for the generated turn in the placeholder
// conversation; the delta is what the template writes after it.
const assistantMark = "PRORL-GENERATED-TURN-7f3a9c"

// textDelta renders the placeholder conversation, the generated turn and
// the new messages, and encodes what follows the generated turn: after the
// end of the assistant turn when the model ended it with a stop token (the
// template's bridge, e.g. the newline after <|im_end|>), else everything
// the template writes after the turn's text, its end-of-turn token
// included. A model may end its turn with another of its stop tokens than
// the template writes (Qwen's <|endoftext|> for <|im_end|>): its token is
// kept and the bridge follows it. The past is never rendered or re-encoded.
func textDelta(tok TextTokenizer, stopID int, msgs []trajectory.Message, tools []trajectory.Tool, kw map[string]any) ([]int, string, error) {
	conv := make([]trajectory.Message, 0, len(msgs)+3)
	conv = append(conv, trajectory.Message{Role: "system", Content: "S"}, trajectory.Message{Role: "user", Content: "U"},
		trajectory.Message{Role: "assistant", Content: assistantMark})
	conv = append(conv, msgs...)
	text, err := tok.RenderText(conv, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: kw})
	if err != nil {
		return nil, "", fmt.Errorf("render observation: %w", err)
	}
	i := strings.LastIndex(text, assistantMark)
	if i < 0 {
		return nil, "", fmt.Errorf("the chat template does not render an assistant message's content")
	}
	rest := text[i+len(assistantMark):]
	if stop := tok.TokenText(stopID); stop != "" {
		end := -1
		for _, id := range append([]int{stopID}, tok.StopIDs()...) {
			t := tok.TokenText(id)
			if j := strings.Index(rest, t); t != "" && j >= 0 && (end < 0 || j+len(t) < end) {
				end = j + len(t)
			}
		}
		if end < 0 {
			return nil, "", fmt.Errorf("the chat template does not end an assistant turn with the model's stop token %q or another of its stop tokens", stop)
		}
		rest = rest[end:]
	}
	return tok.EncodeText(rest), rest, nil
}

// Verifier checks, turn by turn, that the template renders the whole
// conversation as exactly the text of the tokens kept: if it does not (a
// template that is not append-only, such as Qwen3 dropping earlier
// <think> blocks, or a model that formats a tool call differently from
// the template), the trajectory records the mismatch. The tokens are kept
// either way: the past is never re-tokenised.
type Verifier struct {
	tok  TextTokenizer
	text []byte // bytes of the first n ids of the sequence
	n    int
}

// NewVerifier returns a verifier for one rollout, or nil when the
// tokenizer cannot render text.
func NewVerifier(tok Tokenizer) *Verifier {
	tt, ok := tok.(TextTokenizer)
	if !ok {
		return nil
	}
	return &Verifier{tok: tt}
}

// Check renders the conversation with the generation prompt and compares
// it with the sequence ids (the whole sequence so far; only the ids not
// seen by an earlier call are decoded). It returns -1 when they agree,
// else the byte offset of the first difference.
func (v *Verifier) Check(ids []int, msgs []trajectory.Message, tools []trajectory.Tool, kw map[string]any) (int, error) {
	v.text = v.tok.AppendBytes(v.text, ids[v.n:])
	v.n = len(ids)
	want, err := v.tok.RenderText(msgs, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: kw})
	if err != nil {
		return 0, err
	}
	if string(v.text) == want {
		return -1, nil
	}
	n := min(len(want), len(v.text))
	for i := range n {
		if v.text[i] != want[i] {
			return i, nil
		}
	}
	return n, nil
}

// Text is the sequence's text so far (for diagnostics).
func (v *Verifier) Text() string { return string(v.text) }
