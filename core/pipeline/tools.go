package pipeline

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
)

// toolLists are the episodes' tool lists, built once per plugin process
// (its DomainInfo) and subset of tools allowed, and frozen
// (trajectory.FreezeTools): a plugin's rollouts share one list, encoded once.
type toolLists struct {
	mu sync.Mutex
	m  map[toolsKey][]trajectory.Tool
}

type toolsKey struct {
	info    *pluginhost.Info
	allowed string
}

// maxToolLists bounds the lists kept (a plugin whose tasks each allow
// their own subset makes one per subset).
const maxToolLists = 256

// of is the tools of info that allowed names (all when none). The list
// is shared and must not change; its capacity is its length, so an append
// copies it.
func (c *toolLists) of(info *pluginhost.Info, allowed []string) []trajectory.Tool {
	k := toolsKey{info: info, allowed: strings.Join(allowed, "\x00")}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts, ok := c.m[k]; ok {
		return ts
	}
	ts := buildTools(info, allowed)
	if c.m == nil || len(c.m) >= maxToolLists {
		c.m = map[toolsKey][]trajectory.Tool{}
	}
	c.m[k] = trajectory.FreezeTools(ts)
	return ts
}

func buildTools(info *pluginhost.Info, allowed []string) []trajectory.Tool {
	if info == nil {
		return nil
	}
	var ts []trajectory.Tool
	for _, t := range info.Tools {
		if len(allowed) > 0 && !slices.Contains(allowed, t.Name) {
			continue
		}
		params := json.RawMessage(t.Parameters)
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		ts = append(ts, trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return slices.Clip(ts)
}
