package toolcall

import (
	"slices"
	"testing"

	"github.com/prorl/prorl/core/config"
)

// TestFormatsInConfig: the config accepts exactly the formats parsed here.
func TestFormatsInConfig(t *testing.T) {
	if !slices.Equal(Formats, config.ToolCallFormats) {
		t.Fatalf("toolcall.Formats %v, config.ToolCallFormats %v", Formats, config.ToolCallFormats)
	}
}
