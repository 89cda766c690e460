// Package sweimage locates the per-instance image of a software-engineering
// task from a template, for the swe domain and for admins checking a
// dataset (prorl-host swe images).
package sweimage

import (
	"regexp"
	"strings"
)

// DefaultTemplate fits the images `make swe-fixtures` builds (bwrap root
// directories). For Apptainer SIFs converted from the SWE-bench images use
// "{image_dir}/sweb.eval.x86_64.{instance_id_lower}.sif".
const DefaultTemplate = "{image_dir}/swe-{instance_id}/rootfs"

// Path expands a template: {image_dir}, {instance_id}, {instance_id_lower}
// and {docker_image} (R2E-Gym; '/' and ':' become '_').
func Path(template, imageDir, instanceID, dockerImage string) string {
	docker := strings.NewReplacer("/", "_", ":", "_").Replace(dockerImage)
	return strings.NewReplacer("{image_dir}", imageDir, "{instance_id}", instanceID,
		"{instance_id_lower}", strings.ToLower(instanceID), "{docker_image}", docker).Replace(template)
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// R2EInstanceID names an R2E-Gym row, which has no id: its repository and
// the commit's first seven digits. "" when either is missing.
func R2EInstanceID(repoName, commit string) string {
	if repoName == "" || !commitHash.MatchString(commit) {
		return ""
	}
	return repoName + "-" + commit[:7]
}
