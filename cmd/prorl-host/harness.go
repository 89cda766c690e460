package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prorl/prorl/core/config"
)

// harnessCmd lists the configured agent harnesses or installs them.
func harnessCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "usage: prorl-host harness list|install [--config F] [NAME...]"
	if len(args) == 0 || (args[0] != "list" && args[0] != "install") {
		return usageError{use}
	}
	fs := flag.NewFlagSet("harness "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "host config (default: embedded); its [harnesses.*] tables join the presets")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		for n := range cfg.Harnesses {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	for _, n := range names {
		h, ok := cfg.Harnesses[n]
		if !ok {
			return usageError{fmt.Sprintf("unknown harness %q (known: %s)", n, strings.Join(harnessNames(cfg), ", "))}
		}
		if args[0] == "list" {
			state := "not installed"
			if installed(h) {
				state = "installed"
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", n, state, h.Dir)
			continue
		}
		if err := installHarness(ctx, n, h, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\tinstalled\t%s\n", n, h.Dir)
	}
	return nil
}

func harnessNames(cfg *config.Config) []string {
	var out []string
	for n := range cfg.Harnesses {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// stamp records the install command a harness's dir was made with: the
// install is skipped while it is unchanged, and redone when it changes.
const stamp = ".prorl-installed"

func installCommand(h *config.Harness) []string {
	argv := make([]string, len(h.Install))
	for i, a := range h.Install {
		argv[i] = strings.ReplaceAll(a, "{dir}", h.Dir)
	}
	return argv
}

func installed(h *config.Harness) bool {
	b, err := os.ReadFile(filepath.Join(h.Dir, stamp))
	return err == nil && bytes.Equal(b, []byte(strings.Join(installCommand(h), "\x00")))
}

// installHarness runs the preset's install into a fresh directory beside
// Dir and moves it in place: a failed install leaves no half a harness.
func installHarness(ctx context.Context, name string, h *config.Harness, stderr io.Writer) error {
	if installed(h) {
		return nil
	}
	if len(h.Install) == 0 {
		return fmt.Errorf("harness %s: no install command, and %s is not installed", name, h.Dir)
	}
	if err := os.MkdirAll(filepath.Dir(h.Dir), 0o755); err != nil {
		return err
	}
	tmp := h.Dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	staged := *h
	staged.Dir = tmp
	argv := installCommand(&staged)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("harness %s: install %q: %w", name, argv, err)
	}
	// Readable by every sandbox uid (a root host runs each as its own).
	if err := exec.CommandContext(ctx, "chmod", "-R", "a+rX", tmp).Run(); err != nil {
		return fmt.Errorf("harness %s: chmod: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, stamp), []byte(strings.Join(installCommand(h), "\x00")), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(h.Dir); err != nil {
		return err
	}
	return os.Rename(tmp, h.Dir)
}
