package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idscheck/idscheck/checker"
)

// ErrNoResult is returned by ReadResult when the directory holds no
// result.json.
var ErrNoResult = errors.New("no " + ResultFile)

// maxResultSize bounds how much ReadResult reads: a result.json is evidence
// bounded per rule, never a whole history.
const maxResultSize = 256 << 20

// WriteAll writes result.json, junit.xml and index.html of r into dir,
// creating it. Each file is written whole to a temporary name and renamed, so
// a crash never leaves half a report under the final name.
func WriteAll(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Result) error
	}{
		{ResultFile, WriteJSON},
		{JUnitFile, WriteJUnit},
		{HTMLFile, WriteHTML},
	} {
		var b bytes.Buffer
		if err := f.write(&b, r); err != nil {
			return fmt.Errorf("reports: %s: %w", f.name, err)
		}
		if err := writeFileAtomic(filepath.Join(dir, f.name), b.Bytes()); err != nil {
			return fmt.Errorf("reports: %s: %w", f.name, err)
		}
	}
	return nil
}

// RenderAll writes junit.xml and index.html of r into dir (creating it), and
// result.json too when writeJSON is set: `idscheck report` re-renders a run
// directory in place without touching its result.json, and writes all three
// elsewhere.
func RenderAll(dir string, r *Result, writeJSON bool) error {
	if writeJSON {
		return WriteAll(dir, r)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Result) error
	}{
		{JUnitFile, WriteJUnit},
		{HTMLFile, WriteHTML},
	} {
		var b bytes.Buffer
		if err := f.write(&b, r); err != nil {
			return fmt.Errorf("reports: %s: %w", f.name, err)
		}
		if err := writeFileAtomic(filepath.Join(dir, f.name), b.Bytes()); err != nil {
			return fmt.Errorf("reports: %s: %w", f.name, err)
		}
	}
	return nil
}

func writeFileAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// jsonResult is result.json: the Result with its computed Summary beside it.
type jsonResult struct {
	*resultAlias
	Summary Summary `json:"summary"`
}

type resultAlias Result

// WriteJSON writes r as indented JSON, secrets redacted, with Schema set and
// the computed Summary added. ReadResult reads it back into an equal Result.
func WriteJSON(w io.Writer, r *Result) error {
	c := redacted(r)
	c.Schema = SchemaVersion
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsonResult{resultAlias: (*resultAlias)(c), Summary: c.Summary()}); err != nil {
		return fmt.Errorf("result.json: %w", err)
	}
	return nil
}

// ReadResult reads dir/result.json. It returns an error wrapping ErrNoResult
// when the file does not exist, and refuses a newer schema than this build
// knows.
func ReadResult(dir string) (*Result, error) {
	f, err := os.Open(filepath.Join(dir, ResultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoResult, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	defer f.Close()
	return DecodeResult(io.LimitReader(f, maxResultSize))
}

// DecodeResult decodes a result.json read from rd.
func DecodeResult(rd io.Reader) (*Result, error) {
	var j struct {
		*resultAlias
		Summary json.RawMessage `json:"summary"` // recomputed, never trusted
	}
	j.resultAlias = new(resultAlias)
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	r := (*Result)(j.resultAlias)
	if r.Schema == 0 {
		return nil, errors.New("read result: not an idscheck result.json (no schema field)")
	}
	if r.Schema > SchemaVersion {
		return nil, fmt.Errorf("read result: schema %d is newer than this idscheck understands (%d): use a newer idscheck", r.Schema, SchemaVersion)
	}
	return r, nil
}

const redactedText = "[redacted]"

// redacted returns a deep enough copy of r in which credential headers of
// every exchange and every value of r.Redact are replaced by "[redacted]",
// and times carry no monotonic reading. r itself is not changed.
func redacted(r *Result) *Result {
	c := *r
	rep := redact.NewRedactorMarker(redactedText, r.Redact...)
	str := rep.String
	c.Redact = nil
	// Wall clock only: a monotonic reading would make a duration rendered
	// now differ from the same one rendered from result.json.
	c.Started, c.Finished = c.Started.Round(0), c.Finished.Round(0)
	c.Command = str(c.Command)
	c.Target.URL = str(c.Target.URL)
	c.Target.Command = str(c.Target.Command)
	c.Notes = mapStrings(c.Notes, str)
	c.Unreachable = str(c.Unreachable)
	c.Rules = make([]RuleEntry, len(r.Rules))
	for i, e := range r.Rules {
		e.Result.Reason = str(e.Result.Reason)
		e.Result.BlockedBy = str(e.Result.BlockedBy) // a step may be named by what it sent
		e.Result.BlockedStep = str(e.Result.BlockedStep)
		e.Result.BlockedIn = str(e.Result.BlockedIn)
		e.Result.Scenarios = mapStrings(e.Result.Scenarios, str)
		if e.Result.Evidence != nil {
			ev := make([]verdict.Evidence, len(e.Result.Evidence))
			for j, x := range e.Result.Evidence {
				x.Scenario = str(x.Scenario)
				x.Step = str(x.Step)
				x.Expected = str(x.Expected)
				x.Observed = str(x.Observed)
				if x.Exchanges != nil {
					exs := make([]verdict.Exchange, len(x.Exchanges))
					for k, ex := range x.Exchanges {
						ex.Path = str(ex.Path)
						ex.Replica = str(ex.Replica)
						ex.ReqHeaders = rep.Header(ex.ReqHeaders)
						ex.RespHeaders = rep.Header(ex.RespHeaders)
						ex.ReqBody = str(ex.ReqBody)
						ex.RespBody = str(ex.RespBody)
						ex.Err = str(ex.Err)
						ex.Call, ex.Return = ex.Call.Round(0), ex.Return.Round(0)
						exs[k] = ex
					}
					x.Exchanges = exs
				}
				ev[j] = x
			}
			e.Result.Evidence = ev
		}
		c.Rules[i] = e
	}
	if r.Chaos != nil {
		ch := *r.Chaos
		ch.Start, ch.End = ch.Start.Round(0), ch.End.Round(0)
		ch.Anomalies = make([]checker.Anomaly, len(r.Chaos.Anomalies))
		for i, a := range r.Chaos.Anomalies {
			a.Explanation = str(a.Explanation)
			ch.Anomalies[i] = a
		}
		ch.Timeline = make([]FaultSpan, len(r.Chaos.Timeline))
		for i, f := range r.Chaos.Timeline {
			f.Start, f.End = f.Start.Round(0), f.End.Round(0)
			ch.Timeline[i] = f
		}
		if r.Chaos.Timeline == nil {
			ch.Timeline = nil
		}
		if r.Chaos.Anomalies == nil {
			ch.Anomalies = nil
		}
		if len(r.Redact) > 0 {
			// Every other field of the section (anomaly keys, their
			// operations and effects, fault parameters, failing keys) may
			// carry what the workload sent: redact them all, through JSON.
			ch = redactChaos(ch, rep)
		}
		c.Chaos = &ch
	}
	return &c
}

// redactChaos returns ch with every secret replaced in every string it
// holds, by a JSON round trip (the Redactor replaces each secret's
// JSON-escaped form too). It returns ch unchanged when the round trip fails.
func redactChaos(ch Chaos, rep *redact.Redactor) Chaos {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ch); err != nil {
		return ch
	}
	var out Chaos
	if err := json.Unmarshal([]byte(rep.String(b.String())), &out); err != nil {
		return ch
	}
	return out
}

func mapStrings(ss []string, f func(string) string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}
