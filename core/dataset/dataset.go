// Package dataset reads task files: JSONL, or Parquet (the format
// SWE-bench, SWE-Gym and most Hugging Face datasets ship in), as a stream
// of JSON objects, one per line.
package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

// parquetJSONL converts every row to a JSON object keyed by column name,
// each value rendered by its column's Arrow type (value). The file is read
// with Apache Arrow's Go implementation, which restores the types pyarrow
// and datasets wrote (from the schema they store in the file).
func parquetJSONL(f *os.File) (_ []byte, err error) {
	// A reader of untrusted bytes: a panic on a malformed file (none is
	// known; FuzzParquet looks) is an error naming the file instead.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("parquet: malformed file: %v", p)
		}
	}()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	defer pr.Close()
	if err := checkChunks(pr, f); err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 256}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	defer rr.Release()
	var out bytes.Buffer
	line := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		fields := rec.Schema().Fields()
		for i := range int(rec.NumRows()) {
			line++
			row := make(map[string]any, len(fields))
			for c, fd := range fields {
				v, err := value(rec.Column(c), i)
				if err != nil {
					return nil, fmt.Errorf("parquet row %d, column %s: %w", line, fd.Name, err)
				}
				row[fd.Name] = v
			}
			b, err := json.Marshal(row)
			if err != nil {
				return nil, fmt.Errorf("parquet row %d: %w", line, err)
			}
			out.Write(b)
			out.WriteByte('\n')
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	return out.Bytes(), nil
}

// checkChunks refuses a file whose column chunks lie outside it. Arrow's
// reader reads columns in goroutines of its own, where a panic on such a
// chunk (a negative length, FuzzParquet) cannot be recovered: it would
// end the process.
func checkChunks(pr *file.Reader, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	md := pr.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		if rg.NumRows() < 0 {
			return fmt.Errorf("row group %d: %d rows", g, rg.NumRows())
		}
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d, column %d: %w", g, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 4 || n <= 0 || cc.NumValues() < 0 || start > size || n > size-start {
				return fmt.Errorf("row group %d, column %s: a chunk of %d bytes at %d, in a file of %d", g, cc.PathInSchema(), n, start, size)
			}
		}
	}
	return nil
}
