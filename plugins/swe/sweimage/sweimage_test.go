package sweimage

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct{ repo, commit, want string }{
		{"prorl_r2e", "cc99c07e62a0a05d5a2ae23bfb0e8d71697912c4", "prorl_r2e-cc99c07"},
		{"", "cc99c07e62a0a05d5a2ae23bfb0e8d71697912c4", ""},
		{"r", "not-a-commit", ""},
	} {
		if got := R2EInstanceID(c.repo, c.commit); got != c.want {
			t.Errorf("R2EInstanceID(%q, %q) = %q, want %q", c.repo, c.commit, got, c.want)
		}
	}
	if got := Path(DefaultTemplate, "/img", "a__b-1", "x/y:z"); got != "/img/swe-a__b-1/rootfs" {
		t.Errorf("Path: %s", got)
	}
	if got := Path("{image_dir}/{docker_image}.sif", "/img", "", "prorl/r2e:abc"); got != "/img/prorl_r2e_abc.sif" {
		t.Errorf("Path: %s", got)
	}
}
