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
	for _, c := range []struct {
		name   string
		calls  []sdktest.Call
		final  string
		reward float64
	}{
		{"first guess", guesses("crane"), "", 1},
		{"third guess", guesses("slate", "brine", "crane"), "", 1 - 0.5*2/3.0},
		{"claims the word without guessing it", nil, "crane", 0},
		{"claims it after wrong guesses", guesses("slate"), "The word is crane.", 0},
		{"guesses past the limit", guesses("slate", "brine", "trace", "crane"), "", 0},
		{"not words count for nothing", guesses("cr", "crane!", "crane"), "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := sdktest.Play(ctx, h, "g-"+c.name, json.RawMessage(task), c.calls, c.final)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(p.Score.Reward-c.reward) > 1e-9 {
				t.Fatalf("reward %v, want %v (outputs %v)", p.Score.Reward, c.reward, p.Outputs)
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
