// Command prorl-stem is the STEM task domain: multiple choice (GPQA,
// MMLU-Pro, SuperGPQA style), numeric answers with units (SciBench style)
// and free-form short answers, each scored without a judge model.
package main

import "github.com/prorl/prorl/sdk"

func main() { sdk.Serve(Domain) }
