package main

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

const task = `{"answer": "crane"}`

func guesses(ws ...string) []sdktest.Call {
	out := make([]sdktest.Call, len(ws))
	for i, w := range ws {
		out[i] = sdktest.Call{Tool: "guess", Args: map[string]string{"word": w}}
	}
	return out
}

func TestClues(t *testing.T) {
	for _, c := range []struct{ guess, answer, want string }{
		{"crane", "crane", "GGGGG"},
		{"nacre", "crane", "YYYYG"},
		{"eerie", "crane", "--Y-G"},
		{"speed", "abide", "--Y-Y"},
		{"allee", "eagle", "YY-YG"},
	} {
		if got := Clues(c.guess, c.answer); got != c.want {
			t.Errorf("Clues(%s, %s) = %s, want %s", c.guess, c.answer, got, c.want)
		}
	}
}

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain: Domain,
		Cases: []sdktest.Case{{Task: json.RawMessage(task),
			RightCalls: guesses("crane"), WrongCalls: guesses("slate", "crane"), Right: "crane", Wrong: "crane"}},
		BadTasks: []json.RawMessage{json.RawMessage(`{"answer": "cranes"}`), json.RawMessage(`{"answer": "CRANE"}`)},
	})
}

// TestGames plays whole games, including what a policy would try to be
// paid without solving: claiming the word, guessing past the limit,
// guessing after a win, or a state carried over from another rollout.
func TestGames(t *testing.T) {
	h := sdktest.Start(t, Domain)
	ctx := context.Background()
	if _, err := h.Configure(ctx, json.RawMessage(`{"max_guesses": 3}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range sdktest.LoadCases[sdktest.PlayCase](t, "testdata/games.json") {
		t.Run(c.Name, func(t *testing.T) {
			p, err := sdktest.Play(ctx, h, "g-"+c.Name, json.RawMessage(task), c.Calls, c.Final)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(p.Score.Reward-c.Reward) > 1e-9 {
				t.Fatalf("reward %v, want %v (outputs %v)", p.Score.Reward, c.Reward, p.Outputs)
			}
		})
	}
	// A guess after the win is refused, and the state is the rollout's own.
	p, err := sdktest.Play(ctx, h, "after", json.RawMessage(task), guesses("crane"), "")
	if err != nil || len(p.Outputs) != 1 || !p.Outputs[0].Done {
		t.Fatalf("a winning guess must end the episode: %v %+v", err, p)
	}
	if Domain.Sessions() != 0 {
		t.Fatalf("%d sessions left after every rollout was released", Domain.Sessions())
	}
	// A tool call for a rollout this process never prepared fails the rollout.
	_, err = sdktest.Play(ctx, h, "x", json.RawMessage(`{"answer": "x"}`), nil, "")
	if err == nil || !strings.Contains(err.Error(), "invalid_task") {
		t.Fatalf("bad task: %v", err)
	}
}
