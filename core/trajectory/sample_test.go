package trajectory

import "testing"

// TestSampleOf: every status and failure reason of the fixed vocabulary
// maps to one kind of sample; only the policy's own doing is trainable.
func TestSampleOf(t *testing.T) {
	want := map[string]string{
		ReasonContextOverflow: SampleTrainable, ReasonMaxTurns: SampleTrainable, // truncated: scored
		ReasonBackendUnavailable: SampleInfrastructure, ReasonPluginCrashed: SampleInfrastructure, ReasonSandboxFailed: SampleInfrastructure,
		ReasonTimeout: SampleInfrastructure, ReasonToolError: SampleInfrastructure, ReasonInternal: SampleInfrastructure,
		ReasonInterrupted: SampleInfrastructure, ReasonEvalFailed: SampleInfrastructure,
		ReasonCancelled: SampleCancelled, ReasonEarlyStopped: SampleCancelled, ReasonGroupDropped: SampleCancelled,
		ReasonInvalidTask: SampleInvalidTask,
	}
	statusOf := map[string]Status{ReasonContextOverflow: StatusTruncated, ReasonMaxTurns: StatusTruncated, ReasonTimeout: StatusTimeout,
		ReasonCancelled: StatusCancelled, ReasonEarlyStopped: StatusCancelled, ReasonGroupDropped: StatusCancelled}
	for _, reason := range Reasons {
		w, ok := want[reason]
		if !ok {
			t.Errorf("reason %q has no kind of sample in this table: add it (and to docs/trainers.md)", reason)
			continue
		}
		st, ok := statusOf[reason]
		if !ok {
			st = StatusFailed
		}
		if got := SampleOf(st, &Failure{Stage: StageRun, Reason: reason}); got != w {
			t.Errorf("%s %s: %s, want %s", st, reason, got, w)
		}
	}
	for st, w := range map[Status]string{StatusCompleted: SampleTrainable, StatusTruncated: SampleTrainable, StatusTimeout: SampleInfrastructure,
		StatusCancelled: SampleCancelled, StatusFailed: SampleInfrastructure} {
		if got := SampleOf(st, nil); got != w {
			t.Errorf("%s without a failure: %s, want %s", st, got, w)
		}
	}
}
