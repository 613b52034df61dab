package aiperf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Artifact file names inside a run directory (aiperf config/artifacts.py).
const (
	RecordsFile = "profile_export.jsonl"
	RawFile     = "profile_export_raw.jsonl"
	SummaryFile = "profile_export_aiperf.json"
	CSVFile     = "profile_export_aiperf.csv"
	InputsFile  = "inputs.json"
)

// ReadRecords reads profile_export.jsonl. Both AIPerf's and Iris's files are accepted; explicit
// nulls read as absent.
func ReadRecords(path string) ([]Record, error) {
	var out []Record
	err := readLines(path, func(line []byte) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// ReadRaw reads profile_export_raw.jsonl.
func ReadRaw(path string) ([]RawRecord, error) {
	var out []RawRecord
	err := readLines(path, func(line []byte) error {
		var r RawRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

func readLines(path string, each func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			n++
			if perr := each(line); perr != nil {
				return fmt.Errorf("read %s: line %d: %w", path, n, perr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// SummaryFileData is a summary JSON as read back: every top-level member, metric blocks
// decoded on demand.
type SummaryFileData map[string]json.RawMessage

// ReadSummary reads profile_export_aiperf.json.
func ReadSummary(path string) (SummaryFileData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read summary: %w", err)
	}
	var s SummaryFileData
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read summary %s: %w", path, err)
	}
	return s, nil
}

// Block is one metric block of a summary as read back; absent or null statistics are nil.
type Block struct {
	Unit  string   `json:"unit"`
	Avg   *float64 `json:"avg"`
	Min   *float64 `json:"min"`
	Max   *float64 `json:"max"`
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	P99   *float64 `json:"p99"`
	Std   *float64 `json:"std"`
	Count *int     `json:"count"`
	Sum   *float64 `json:"sum"`
}

// Metric returns the block of tag.
func (s SummaryFileData) Metric(tag string) (Block, bool) {
	raw, ok := s[tag]
	if !ok {
		return Block{}, false
	}
	var b Block
	if err := json.Unmarshal(raw, &b); err != nil || b.Unit == "" {
		return Block{}, false
	}
	return b, true
}

// String returns a top-level string member.
func (s SummaryFileData) String(key string) string {
	var v string
	_ = json.Unmarshal(s[key], &v)
	return v
}
