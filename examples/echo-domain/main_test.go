package main

import (
	"encoding/json"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{Domain: echo{}, Cases: []sdktest.Case{
		{Task: json.RawMessage(`{"word":"hi"}`), Right: "hi", Wrong: "ho"},
	}})
}
