package dataset

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// seedParquet is a small file with nested, optional and dictionary
// columns, for the fuzzer to mutate.
func seedParquet(t testing.TB, codec compress.Compression) []byte {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "tests", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "m", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
	}, nil)
	return writeParquet(t, schema, `[{"id": "a", "tests": ["x", "y"], "n": 1, "ok": true, "m": {"a": 1.5}},
		  {"id": "b", "tests": null, "n": null, "ok": false, "m": null},
		  {"id": "a", "tests": [], "n": -7, "ok": null, "m": {"a": null}}]`, 2,
		parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithDataPageVersion(parquet.DataPageV2)))
}

// writeParquet is rows (a JSON array of objects) of schema as a Parquet
// file written by Arrow, chunk rows to a row group; nil props: defaults.
func writeParquet(t testing.TB, schema *arrow.Schema, rows string, chunk int64, props *parquet.WriterProperties) []byte {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(array.NewTableFromRecords(schema, []arrow.RecordBatch{rec}), &buf, chunk, props, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Any bytes: rows of JSON objects, or an error; never a panic or a hang.
// Go's fuzzer crawls here (about a dozen inputs a minute on this VM: every
// input snapshots the coverage counters of all of Arrow's instrumented
// code), so TestMalformedParquet mutates the same seeds by the thousand.
func FuzzParquet(f *testing.F) {
	dir := f.TempDir()
	for _, c := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd} {
		seed := seedParquet(f, c)
		path := filepath.Join(dir, "seed.parquet")
		if err := os.WriteFile(path, seed, 0o600); err != nil {
			f.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			f.Fatalf("seed (%v): %v", c, err)
		}
		if out, _ := io.ReadAll(r); bytes.Count(out, []byte("\n")) != 3 {
			f.Fatalf("seed (%v) read as %q", c, out)
		}
		f.Add(seed)
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !bytes.HasPrefix(b, []byte("PAR1")) {
			b = append([]byte("PAR1"), b...)
		}
		if err := readAny(filepath.Join(dir, "f.parquet"), b); err != nil {
			t.Fatal(err)
		}
	})
}

// readAny reads b as a file at path, which must give rows of JSON objects
// or an error from Open; anything else is the error it returns.
func readAny(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	r, err := Open(path)
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(r)
	for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(out) == 0 {
			break
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("a row that is not a JSON object: %q", line)
		}
	}
	return nil
}

// Thousands of damaged files (bytes, bits and 32-bit fields of the seeds
// changed): each read as rows or refused, none ending the process (a
// chunk with a negative length did, in a goroutine of Arrow's reader,
// before checkChunks: testdata/fuzz/FuzzParquet/negative-chunk-length) or
// taking longer than 10 s.
func TestMalformedParquet(t *testing.T) {
	var seeds [][]byte
	for _, c := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd} {
		seeds = append(seeds, seedParquet(t, c))
	}
	r := rand.New(rand.NewSource(41))
	path := filepath.Join(t.TempDir(), "f.parquet")
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		b := slices.Clone(seeds[r.Intn(len(seeds))])
		for range 1 + r.Intn(3) {
			at := 4 + r.Intn(len(b)-12) // the magic bytes stay
			switch r.Intn(4) {
			case 0:
				b[at] = byte(r.Intn(256))
			case 1:
				b[at] ^= 1 << r.Intn(8)
			case 2:
				binary.LittleEndian.PutUint32(b[at:], r.Uint32())
			case 3:
				binary.LittleEndian.PutUint32(b[at:], uint32(r.Intn(1<<20)))
			}
		}
		done := make(chan error, 1)
		go func() { done <- readAny(path, b) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("file %d: still reading after 10 s: %q", i, b)
		}
	}
}
