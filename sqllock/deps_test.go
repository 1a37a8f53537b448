package sqllock_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDependencies: the core imports no database driver, and each dialect package
// links only its own: importing sqllock/postgres neither registers the mysql and
// sqlite database/sql drivers nor links modernc SQLite.
func TestDependencies(t *testing.T) {
	const (
		pgx    = "github.com/jackc/pgx/v5"
		mysql  = "github.com/go-sql-driver/mysql"
		sqlite = "modernc.org/sqlite"
	)
	for pkg, banned := range map[string][]string{
		"github.com/distlock/distlock/sqllock":          {pgx, mysql, sqlite},
		"github.com/distlock/distlock/sqllock/postgres": {mysql, sqlite},
		"github.com/distlock/distlock/sqllock/mysql":    {pgx, sqlite},
		"github.com/distlock/distlock/sqllock/sqlite":   {pgx, mysql},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "go list -deps %s: %s", pkg, out)
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				require.False(t, dep == b || strings.HasPrefix(dep, b+"/"), "%s links %s", pkg, dep)
			}
		}
	}
}
