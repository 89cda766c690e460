// Command prorl-math is the math task domain: a problem in, an answer in
// \boxed{} out, scored by equivalence with the reference answer.
package main

import "github.com/prorl/prorl/sdk"

func main() { sdk.Serve(Domain) }
