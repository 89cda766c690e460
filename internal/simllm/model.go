package simllm

import (
	"encoding/json"
	"fmt"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// vocab is what the simulator needs of a tokenizer.
type vocab interface {
	Encode(s string) []int
	Decode(ids []int) string
	TokenString(id int) string
	VocabSize() int
}

// localVocab adapts a model directory's tokenizer.
type localVocab struct{ l *tokenizer.Local }

func (v localVocab) Encode(s string) []int     { return v.l.EncodeText(s) }
func (v localVocab) Decode(ids []int) string   { return v.l.BPE().Decode(ids) }
func (v localVocab) TokenString(id int) string { return v.l.BPE().Decode([]int{id}) }
func (v localVocab) VocabSize() int            { return v.l.BPE().VocabSize() }

// useModel switches to a model directory's tokenizer and chat template; the
// scripted policy still reads the first user message of a ChatML prompt.
func (s *Server) useModel(l *tokenizer.Local) {
	s.tok = localVocab{l}
	if id, ok := l.BPE().TokenID("<|im_end|>"); ok {
		s.imEnd = id
	} else if stops := l.StopIDs(); len(stops) > 0 {
		s.imEnd = stops[0]
	}
	s.render = func(msgs []Message, tools []Tool, agp bool) (string, error) {
		var tm []trajectory.Message
		var tt []trajectory.Tool
		if err := convert(msgs, &tm); err != nil {
			return "", err
		}
		if err := convert(tools, &tt); err != nil {
			return "", err
		}
		return l.RenderText(tm, tt, tokenizer.RenderOptions{AddGenerationPrompt: agp})
	}
}

// convert moves OpenAI-shaped JSON values between the simulator's and the
// host's message types.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	return nil
}
