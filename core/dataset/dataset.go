// Package dataset reads task files: JSONL, or Parquet (the format
// SWE-bench, SWE-Gym and most Hugging Face datasets ship in), as a stream
// of JSON objects, one per line.
package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// Open returns the rows of a JSONL or Parquet file as JSONL. Parquet is
// recognised by its magic bytes, whatever the file is called.
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "PAR1" {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	defer f.Close()
	b, err := parquetJSONL(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// parquetJSONL converts every row to a JSON object keyed by column name.
func parquetJSONL(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	r := parquet.NewGenericReader[map[string]any](pf, pf.Schema())
	defer r.Close()
	var out bytes.Buffer
	rows := make([]map[string]any, 256)
	for {
		for i := range rows {
			rows[i] = map[string]any{}
		}
		n, err := r.Read(rows)
		for _, row := range rows[:n] {
			b, merr := json.Marshal(row)
			if merr != nil {
				return nil, fmt.Errorf("parquet row: %w", merr)
			}
			out.Write(b)
			out.WriteByte('\n')
		}
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("parquet: %w", err)
		}
	}
}
