// Command prorl-swe is the software-engineering task domain: SWE-bench,
// SWE-Gym and R2E-Gym instances in per-instance images, resolved by their
// own tests in a fresh sandbox.
package main

import "github.com/prorl/prorl/sdk"

func main() { sdk.Serve(New()) }
