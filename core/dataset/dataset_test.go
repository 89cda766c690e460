package dataset

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestParquetAndJSONL(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "test-00000-of-00001.parquet")
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "instance_id", Type: arrow.BinaryTypes.String},
		{Name: "FAIL_TO_PASS", Type: arrow.BinaryTypes.String},
		{Name: "version", Type: arrow.BinaryTypes.String},
	}, nil)
	b := writeParquet(t, schema, `[{"instance_id": "django__django-11099", "FAIL_TO_PASS": "[\"test_a (x.T)\"]", "version": "3.0"},
		  {"instance_id": "astropy__astropy-12907", "FAIL_TO_PASS": "[]", "version": "4.3"}]`, 1024, nil)
	if err := os.WriteFile(pq, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(pq)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r)
	want := `{"FAIL_TO_PASS":"[\"test_a (x.T)\"]","instance_id":"django__django-11099","version":"3.0"}
{"FAIL_TO_PASS":"[]","instance_id":"astropy__astropy-12907","version":"4.3"}
`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	jl := filepath.Join(dir, "x.jsonl")
	os.WriteFile(jl, []byte(`{"a":1}`+"\n"), 0o644)
	r, err = Open(jl)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r)
	if string(b) != `{"a":1}`+"\n" {
		t.Fatalf("jsonl: %q", b)
	}
	bad := filepath.Join(dir, "bad.parquet")
	os.WriteFile(bad, []byte("PAR1 not really"), 0o644)
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), "parquet") {
		t.Fatalf("bad parquet: %v", err)
	}
}
