package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prorl/prorl/plugins/swe/sweimage"
	"github.com/prorl/prorl/sdk"
)

// imagesCommand: which instances of a dataset have their images, found as
// the domain finds them (image_dir and image_template of its config).
// `prorl-host plugins exec swe images --tasks FILE.jsonl`; a Parquet
// dataset through `prorl-host dataset cat FILE.parquet | … --tasks -`.
var imagesCommand = sdk.Command{
	Name:  "images",
	Usage: "--tasks FILE.jsonl|- [--image-dir D] [--image-template T] [--missing-only]",
	Run:   images,
}

func images(_ context.Context, args []string, raw json.RawMessage, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tasks := fs.String("tasks", "", "instances, JSONL (instance_id, docker_image...); - reads stdin")
	imageDir := fs.String("image-dir", "", "override the config's image_dir")
	template := fs.String("image-template", "", "override the config's image_template")
	quiet := fs.Bool("missing-only", false, "print only the instances without an image")
	if err := fs.Parse(args); err != nil {
		return sdk.UsageError(err.Error())
	}
	if *tasks == "" {
		return sdk.UsageError("--tasks is required")
	}
	cfg := Config{ImageTemplate: sweimage.DefaultTemplate}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("the plugin's config: %w", err)
	}
	if *imageDir != "" {
		cfg.ImageDir = *imageDir
	}
	if *template != "" {
		cfg.ImageTemplate = *template
	}
	in := stdin
	if *tasks != "-" {
		f, err := os.Open(*tasks)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	have, missing := 0, 0
	for line := 1; sc.Scan(); line++ {
		var row struct {
			InstanceID  string `json:"instance_id"`
			DockerImage string `json:"docker_image"`
			RepoName    string `json:"repo_name"`
			CommitHash  string `json:"commit_hash"`
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return fmt.Errorf("%s:%d: %w", *tasks, line, err)
		}
		if row.InstanceID == "" { // an R2E-Gym row: named as the domain names it
			row.InstanceID = sweimage.R2EInstanceID(row.RepoName, row.CommitHash)
		}
		if row.InstanceID == "" {
			return fmt.Errorf("%s:%d: not an instance row (instance_id, or an R2E-Gym row's repo_name and commit_hash)", *tasks, line)
		}
		p := sweimage.Path(cfg.ImageTemplate, cfg.ImageDir, row.InstanceID, row.DockerImage)
		if _, err := os.Stat(p); err == nil {
			have++
			if !*quiet {
				fmt.Fprintf(stdout, "ok       %s  %s\n", row.InstanceID, p)
			}
		} else {
			missing++
			fmt.Fprintf(stdout, "missing  %s  %s\n", row.InstanceID, p)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d of %d instances have an image (template %q, image_dir %q)\n", have, have+missing, cfg.ImageTemplate, cfg.ImageDir)
	if missing > 0 {
		return fmt.Errorf("%d instances have no image", missing)
	}
	return nil
}
