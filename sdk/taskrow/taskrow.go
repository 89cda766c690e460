// Package taskrow reads the fields that dataset rows share across domains:
// verl/ProRL rows ({data_source, prompt, reward_model.ground_truth}) and
// plain ones, where a value may be a string, a number or a list.
package taskrow

import (
	"encoding/json"
	"strings"

	"github.com/prorl/prorl/sdk"
)

// PromptText accepts a prompt that is a string or a chat list and returns
// the user text (several user messages joined by a blank line).
func PromptText(raw json.RawMessage, field string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var msgs []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return "", sdk.InvalidTask(field, "must be a string or a list of {role, content}")
	}
	var parts []string
	for _, m := range msgs {
		if m.Role == "user" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

// Scalar renders a JSON string, number or list of them (its first item)
// as text; "" for nothing.
func Scalar(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return ""
		}
		return Scalar(list[0])
	}
	if string(raw) == "null" {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// Verl holds what verl/ProRL rows carry beside a domain's own fields
// ({data_source, prompt, reward_model.ground_truth}); embed it in a row
// struct.
type Verl struct {
	Prompt      json.RawMessage `json:"prompt"`
	RewardModel *struct {
		GroundTruth json.RawMessage `json:"ground_truth"`
	} `json:"reward_model"`
}

// GroundTruth is reward_model.ground_truth; nil when the row has none.
func (v Verl) GroundTruth() json.RawMessage {
	if v.RewardModel == nil {
		return nil
	}
	return v.RewardModel.GroundTruth
}

// Question is the first non-empty of a row's plain question fields, else
// the user text of its prompt (a string or a chat list).
func (v Verl) Question(plain ...string) (string, error) {
	if q := First(plain...); q != "" || len(v.Prompt) == 0 {
		return q, nil
	}
	return PromptText(v.Prompt, "prompt")
}

// First is the first non-empty string.
func First(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
