package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"

	"github.com/prorl/prorl/core/dataset"
	"github.com/prorl/prorl/core/pluginhost"
)

// pluginExec: prorl-host plugins exec [--config F] NAME COMMAND [ARGS...]
// runs a plugin binary's own admin subcommand (sdk.Command) as the host
// runs the plugin: the pinned binary, its environment, its config table.
func pluginExec(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plugins exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "TOML config naming the plugin (default: embedded)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return usageError{"usage: prorl-host plugins exec [--config F] NAME COMMAND [ARGS...]"}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	p, ok := cfg.Plugins[rest[0]]
	if !ok {
		return usageError{fmt.Sprintf("no plugin %q in the config", rest[0])}
	}
	cmd, done, err := pluginhost.Command(rest[0], p, rest[1:])
	if err != nil {
		return err
	}
	defer done()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exitError{code: ee.ExitCode()}
		}
		return fmt.Errorf("plugin %s: %w", rest[0], err)
	}
	return nil
}

// datasetCat: prorl-host dataset cat FILE prints a task file (JSONL or
// Parquet) as JSONL, one row a line, for tools that read JSONL.
func datasetCat(args []string, stdout io.Writer) error {
	if len(args) != 2 || args[0] != "cat" {
		return usageError{"usage: prorl-host dataset cat FILE.jsonl|FILE.parquet"}
	}
	f, err := dataset.Open(args[1])
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(stdout, f)
	return err
}

// sweCmd: prorl-host swe images --tasks F [--config F] [...] is the swe
// plugin's own images command (plugins exec swe images), the task file
// read here (JSONL or Parquet) and handed over as JSONL.
func sweCmd(args []string, stdout, stderr io.Writer) error {
	usage := usageError{"usage: prorl-host swe images --tasks FILE.jsonl|FILE.parquet [--config F] [--image-dir D] [--image-template T] [--missing-only]"}
	if len(args) == 0 || args[0] != "images" {
		return usage
	}
	fs := flag.NewFlagSet("swe images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tasks := fs.String("tasks", "", "instances, JSONL or Parquet")
	cfgPath := fs.String("config", "", "host config whose [plugins.swe] is run (default: embedded)")
	imageDir := fs.String("image-dir", "", "override image_dir")
	template := fs.String("image-template", "", "override image_template")
	quiet := fs.Bool("missing-only", false, "print only the instances without an image")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	if *tasks == "" {
		return usageError{"swe images: --tasks is required"}
	}
	f, err := dataset.Open(*tasks)
	if err != nil {
		return err
	}
	defer f.Close()
	pass := []string{"--config", *cfgPath, "swe", "images", "--tasks", "-"}
	if *imageDir != "" {
		pass = append(pass, "--image-dir", *imageDir)
	}
	if *template != "" {
		pass = append(pass, "--image-template", *template)
	}
	if *quiet {
		pass = append(pass, "--missing-only")
	}
	return pluginExec(pass, f, stdout, stderr)
}
