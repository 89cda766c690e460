// Package sweimage locates the per-instance image of a software-engineering
// task from a template, for the swe domain and for admins checking a
// dataset (prorl-host swe images).
package sweimage

import "strings"

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
