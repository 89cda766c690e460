package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// OverlayDir is where overlays of the config file PATH live: PATH.d, every
// *.toml in it applied in name order (so enabling a plugin is a file of its
// own, not a copy of the whole config).
func OverlayDir(path string) string { return path + ".d" }

// LoadWith reads the config file path (or, when path is "", the embedded
// document base, where {config_dir} is the working directory), then each overlay file of OverlayDir(path), then extra
// (tables from flags, e.g. --plugin). Later layers win: tables merge key by
// key, any other value (arrays too) is replaced. Each file's keys are
// checked on their own, so an unknown key is named with its file and line.
func LoadWith(path string, base []byte, extra map[string]any) (*Config, error) {
	var layers []layer
	vars := Vars{ExeDir: exeDir()}
	if path == "" {
		wd, _ := os.Getwd()
		vars.ConfigDir = wd
		layers = append(layers, layer{"embedded configs/local.toml", base})
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		abs, _ := filepath.Abs(path)
		vars.ConfigDir = filepath.Dir(abs)
		layers = append(layers, layer{path, data})
		files, _ := filepath.Glob(filepath.Join(OverlayDir(path), "*.toml"))
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
			layers = append(layers, layer{f, data})
		}
	}
	if len(layers) == 1 && len(extra) == 0 {
		return Parse(layers[0].data, layers[0].name, vars)
	}
	merged := map[string]any{}
	var names []string
	for _, l := range layers {
		m := map[string]any{}
		if _, err := toml.Decode(string(l.data), &m); err != nil {
			return nil, parseError(l.name, err)
		}
		if err := unknownKeys(l.data, l.name); err != nil {
			return nil, err
		}
		merge(merged, m)
		names = append(names, l.name)
	}
	if len(extra) > 0 {
		merge(merged, extra)
		names = append(names, "flags")
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(merged); err != nil {
		return nil, fmt.Errorf("config: merge %s: %w", strings.Join(names, ", "), err)
	}
	return Parse(buf.Bytes(), strings.Join(names, " + "), vars)
}

type layer struct {
	name string
	data []byte
}

// unknownKeys decodes one layer into a Config to name a key no config has.
func unknownKeys(data []byte, name string) error {
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(Default())
	if err != nil {
		return parseError(name, err)
	}
	return undecoded(md, data, name)
}

// merge puts src over dst: tables merge key by key, other values replace.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
			c := map[string]any{}
			merge(c, sm)
			dst[k] = c
			continue
		}
		dst[k] = v
	}
}

// bareKey is a TOML bare key: what a plugin's name must be.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// PluginFlag turns --plugin NAME=COMMAND (the plugin's path, then its
// arguments, split at spaces) into a [plugins.NAME] table that enables it.
func PluginFlag(v string) (string, map[string]any, error) {
	name, cmd, ok := strings.Cut(v, "=")
	fields := strings.Fields(cmd)
	if !ok || !bareKey.MatchString(name) || len(fields) == 0 {
		return "", nil, fmt.Errorf("--plugin %q: want NAME=PATH [ARG...]", v)
	}
	t := map[string]any{"enabled": true, "path": fields[0]}
	if len(fields) > 1 {
		args := make([]any, 0, len(fields)-1)
		for _, a := range fields[1:] {
			args = append(args, a)
		}
		t["args"] = args
	}
	return name, t, nil
}
