package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prorl/prorl/core/dataset"
	"github.com/prorl/prorl/plugins/swe/sweimage"
)

// sweCmd: prorl-host swe images --tasks F: which instances of a dataset
// have their images, as the swe domain would look for them.
func sweCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "images" {
		return usageError{"usage: prorl-host swe images --tasks FILE.jsonl|FILE.parquet [--config F] [--image-dir D] [--image-template T]"}
	}
	fs := flag.NewFlagSet("swe images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tasks := fs.String("tasks", "", "instances, JSONL or Parquet (instance_id, docker_image...)")
	cfgPath := fs.String("config", "", "host config whose [plugins.swe.config] gives image_dir and image_template (default: embedded)")
	imageDir := fs.String("image-dir", "", "override image_dir")
	template := fs.String("image-template", "", "override image_template")
	quiet := fs.Bool("missing-only", false, "print only the instances without an image")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	if *tasks == "" {
		return usageError{"swe images: --tasks is required"}
	}
	dir, tmpl := "", sweimage.DefaultTemplate
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if p, ok := cfg.Plugins["swe"]; ok {
		if s, ok := p.Config["image_dir"].(string); ok {
			dir = s
		}
		if s, ok := p.Config["image_template"].(string); ok {
			tmpl = s
		}
	}
	if *imageDir != "" {
		dir = *imageDir
	}
	if *template != "" {
		tmpl = *template
	}
	f, err := dataset.Open(*tasks) // JSONL or Parquet
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
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
		p := sweimage.Path(tmpl, dir, row.InstanceID, row.DockerImage)
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
	fmt.Fprintf(stdout, "%d of %d instances have an image (template %q, image_dir %q)\n", have, have+missing, tmpl, dir)
	if missing > 0 {
		return fmt.Errorf("%d instances have no image", missing)
	}
	return nil
}
