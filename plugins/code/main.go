// Command prorl-code is the coding task domain: stdin/stdout problems
// (CodeContests, APPS, TACO, Codeforces style) and function tests
// (HumanEval, MBPP, LiveCodeBench style), judged in a fresh sandbox where
// the solution never meets an expected output.
package main

import "github.com/prorl/prorl/sdk"

func main() { sdk.Serve(New()) }
