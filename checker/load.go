package checker

import (
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/rundir"
	"io/fs"
)

// File names of a history and a ledger in a run directory.
const (
	HistoryFile = rundir.History
	LedgerFile  = rundir.Ledger
)

// Load reads HistoryFile and, when present, LedgerFile from fsys (a run
// directory: os.DirFS(dir)). A missing ledger is an empty one.
func Load(fsys fs.FS) (History, Ledger, error) {
	hf, err := fsys.Open(HistoryFile)
	if err != nil {
		return History{}, Ledger{}, fmt.Errorf("load: %w", err)
	}
	defer hf.Close()
	h, err := ReadHistory(hf)
	if err != nil {
		return History{}, Ledger{}, fmt.Errorf("load: %w", err)
	}
	lf, err := fsys.Open(LedgerFile)
	if errors.Is(err, fs.ErrNotExist) {
		return h, Ledger{}, nil
	}
	if err != nil {
		return History{}, Ledger{}, fmt.Errorf("load: %w", err)
	}
	defer lf.Close()
	l, err := ReadLedger(lf)
	if err != nil {
		return History{}, Ledger{}, fmt.Errorf("load: %w", err)
	}
	return h, l, nil
}
