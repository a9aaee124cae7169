// Package sqlitecols brings a SQLite table made by an earlier version of a
// server up to date: CREATE TABLE IF NOT EXISTS leaves an existing table
// as it was, so the columns added since are added here.
package sqlitecols

import (
	"context"
	"database/sql"
	"fmt"
)

// Column is a column to have: its name and its definition (type,
// constraints, default: a NOT NULL column needs a default to be added to
// a table with rows).
type Column struct{ Name, Def string }

// Ensure adds to table each column of cols it lacks.
func Ensure(ctx context.Context, db *sql.DB, table string, cols ...Column) error {
	for _, col := range cols {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, col.Name).Scan(&n); err != nil {
			return fmt.Errorf("migrate %s: %w", table, err)
		}
		if n == 0 {
			if _, err := db.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col.Name+` `+col.Def); err != nil {
				return fmt.Errorf("migrate %s: %w", table, err)
			}
		}
	}
	return nil
}
