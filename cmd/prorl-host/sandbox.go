package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/host"
	"github.com/prorl/prorl/core/images"
	"github.com/prorl/prorl/core/sandbox"
)

const sandboxUsage = `usage:
  prorl-host sandbox build-image [--dir DIR] [--name default] [--suite bookworm] [--include pkg,pkg] [--force]
  prorl-host sandbox exec [--config F] [--driver D] [--image I] [--network] [--timeout 30s] -- COMMAND [ARG...]`

func sandboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{sandboxUsage}
	}
	switch args[0] {
	case "build-image":
		return buildImage(ctx, args[1:], stdout, stderr)
	case "exec":
		return sandboxExec(ctx, args[1:], stdout, stderr)
	}
	return usageError{sandboxUsage}
}

func buildImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox build-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := config.Default()
	dirDefault, _ := config.Parse([]byte(""), "defaults", config.Vars{})
	if dirDefault != nil {
		def = dirDefault
	}
	dir := fs.String("dir", def.Sandbox.ImageDir, "image directory")
	name := fs.String("name", "default", "image name")
	suite := fs.String("suite", "bookworm", "Debian suite")
	include := fs.String("include", "", "packages (default: the default image's; for --name code, the code image's toolchains too)")
	force := fs.Bool("force", false, "rebuild even if the image exists")
	sif := fs.String("sif", "auto", "also pack a SIF for the apptainer driver: yes, no, or auto (when apptainer is installed)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *include == "" {
		*include = strings.Join(images.DefaultPackages, ",")
		if *name == "code" {
			*include = strings.Join(images.CodePackages, ",")
		}
	}
	root, err := sandbox.RootDir(*dir, *name)
	if err == nil && !*force && !images.SamePackages(*dir, *name, strings.Split(*include, ",")) {
		// Built with other packages: rebuilt, so adding a toolchain takes effect.
		fmt.Fprintf(stdout, "image %q was built with other packages: rebuilding\n", *name)
		*force = true
	}
	if err == nil && !*force {
		fmt.Fprintf(stdout, "image %q exists at %s (use --force to rebuild)\n", *name, root)
	} else {
		start := time.Now()
		fmt.Fprintf(stdout, "building image %q (%s, minbase + %s) in %s\n", *name, *suite, *include, *dir)
		root, err = images.BuildImage(ctx, *dir, *name, *suite, strings.Split(*include, ","), stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "image %q built at %s in %s\n", *name, root, time.Since(start).Round(time.Second))
	}
	if *sif == "no" {
		return nil
	}
	app, aerr := sandbox.FindApptainer("")
	if aerr != nil {
		if *sif == "yes" {
			return aerr
		}
		return nil
	}
	sifPath := filepath.Join(*dir, *name+".sif")
	if _, err := os.Stat(sifPath); err == nil && !*force {
		fmt.Fprintf(stdout, "SIF exists at %s\n", sifPath)
		return nil
	}
	start := time.Now()
	p, err := images.BuildSIF(ctx, app, *dir, *name, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "SIF built at %s in %s\n", p, time.Since(start).Round(time.Second))
	return nil
}

type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func sandboxExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "TOML config (default: embedded configs/local.toml)")
	driver := fs.String("driver", "", "override [sandbox] driver")
	image := fs.String("image", "", "image (default: [sandbox] default_image)")
	network := fs.Bool("network", false, "give the sandbox network access")
	timeout := fs.Duration("timeout", 30*time.Second, "kill the command after this long")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageError{sandboxUsage}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	sc := cfg.Sandbox
	if *driver != "" {
		sc.Driver = *driver
	}
	if sc.Driver == "disabled" {
		return errors.New("sandboxes are disabled in this config")
	}
	scfg := sandbox.ConfigFrom(sc)
	scfg.MaxStarting = 1
	m, err := sandbox.New(scfg, host.NewLogger(config.Log{Level: "warn"}, stderr))
	if err != nil {
		return err
	}
	defer m.Close()
	t0 := time.Now()
	s, err := m.Start(ctx, "admin", sandbox.Spec{Image: *image, Network: *network})
	if err != nil {
		return err
	}
	started := time.Since(t0)
	res, err := s.Exec(ctx, argv, nil, *timeout, "", nil, func(o, e []byte) {
		_, _ = stdout.Write(o)
		_, _ = stderr.Write(e)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "[%s sandbox, image %s, started in %s; exit %d%s]\n", m.Driver(), s.Image, started.Round(time.Millisecond), res.ExitCode,
		map[bool]string{true: ", timed out", false: ""}[res.TimedOut])
	if res.ExitCode != 0 {
		return exitError{res.ExitCode}
	}
	return nil
}
