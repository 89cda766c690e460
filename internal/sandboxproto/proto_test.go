package sandboxproto

import (
	"maps"
	"testing"
)

// Values a driver would mangle (Apptainer expands $ and backslashes and
// --env splits at commas) come through the encoding unchanged.
func TestEnvRoundTrip(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{},
		{"A": ""},
		{"PATH": "/opt/x:/usr/bin", "V": "a,b=c 'q' \"d\" $x ${y} `id` \\ \\$ é\nline two\\"},
	} {
		enc := EncodeEnv(env)
		got, err := DecodeEnv(enc)
		if err != nil || !maps.Equal(got, env) {
			t.Errorf("%q: %v %v, want %v", enc, got, err, env)
		}
		for _, c := range enc {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Errorf("%q holds %q", enc, c)
			}
		}
	}
	for _, bad := range []string{"!", "e30=", "W10"} { // not base64url; padded; a JSON list
		if _, err := DecodeEnv(bad); err == nil {
			t.Errorf("DecodeEnv(%q) took it", bad)
		}
	}
}

func FuzzDecodeEnv(f *testing.F) {
	f.Add(EncodeEnv(map[string]string{"A": "b"}))
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		env, err := DecodeEnv(s)
		if err != nil {
			return
		}
		again, err := DecodeEnv(EncodeEnv(env))
		if err != nil || !maps.Equal(again, env) {
			t.Fatalf("%q: %v, then %v %v", s, env, again, err)
		}
	})
}
