// Command wordle is an example domain with per-rollout state: the model
// guesses a five-letter word with a guess tool that answers with clues;
// the reward comes from the guesses the tool saw, never from what the
// model claims.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prorl/prorl/sdk"
)

type Config struct {
	MaxGuesses int `json:"max_guesses" schema:"min=1,max=20" desc:"Guesses allowed per game."`
}

type Task struct {
	Answer string `json:"answer"`
}

func (t Task) Check() error {
	if len(t.Answer) != 5 || strings.Trim(t.Answer, "abcdefghijklmnopqrstuvwxyz") != "" {
		return sdk.InvalidTask("answer", "must be five lower-case letters, got %q", t.Answer)
	}
	return nil
}

// Game is one rollout's state.
type Game struct {
	Guesses []string
	Solved  bool
}

type GuessArgs struct {
	Word string `json:"word" desc:"A five-letter word."`
}

type rollout = sdk.Rollout[Config, Task, Game]

func guess(_ context.Context, r *rollout, a GuessArgs) (string, error) {
	w := strings.ToLower(strings.TrimSpace(a.Word))
	switch {
	case r.State.Solved:
		return "", fmt.Errorf("the game is over: you solved it")
	case len(r.State.Guesses) >= r.Config.MaxGuesses:
		return "", fmt.Errorf("no guesses left (%d used)", len(r.State.Guesses))
	case len(w) != 5 || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "":
		return "", fmt.Errorf("%q is not five letters", a.Word)
	}
	r.State.Guesses = append(r.State.Guesses, w)
	if w == r.Task.Answer {
		r.State.Solved = true
		r.Finish(w)
		return "GGGGG: solved!", nil
	}
	return fmt.Sprintf("%s (%d guesses left)", Clues(w, r.Task.Answer), r.Config.MaxGuesses-len(r.State.Guesses)), nil
}

// Clues marks each letter G (right place), Y (elsewhere in the word, as
// many times as it occurs there) or - (not in it).
func Clues(guess, answer string) string {
	out := []byte("-----")
	left := map[byte]int{}
	for i := range 5 {
		if guess[i] == answer[i] {
			out[i] = 'G'
		} else {
			left[answer[i]]++
		}
	}
	for i := range 5 {
		if out[i] != 'G' && left[guess[i]] > 0 {
			out[i] = 'Y'
			left[guess[i]]--
		}
	}
	return string(out)
}

var Domain = &sdk.Env[Config, Task, Game]{
	Name: "wordle", Version: "0.1.0", Description: "Guess the five-letter word from clues.",
	Config: Config{MaxGuesses: 6},
	Tools:  []sdk.Tool{sdk.RolloutTool("guess", "Guess the word; the clue marks each letter G (right place), Y (elsewhere) or - (absent).", guess)},
	Episode: func(_ context.Context, r *rollout) (*sdk.Episode, error) {
		q := fmt.Sprintf("Find the hidden five-letter word in at most %d guesses with the guess tool.", r.Config.MaxGuesses)
		return &sdk.Episode{Messages: sdk.Chat("You play Wordle.", q), Limits: sdk.Limits{MaxTurns: r.Config.MaxGuesses + 2}}, nil
	},
	Score: func(_ context.Context, r *rollout, _ sdk.EvaluateRequest) (*sdk.Score, error) {
		n := len(r.State.Guesses)
		sc := &sdk.Score{Resolved: r.State.Solved, Metrics: map[string]float64{"guesses": float64(n)}, Info: map[string]any{"guesses": r.State.Guesses}}
		if r.State.Solved { // fewer guesses, more reward
			sc.Reward = 1 - 0.5*float64(n-1)/float64(r.Config.MaxGuesses)
		}
		return sc, nil
	},
}

func main() { sdk.Serve(Domain) }
