package sqllock

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
)

func TestOptions(t *testing.T) {
	bad := []string{
		"locks; DROP TABLE x",
		"locks\"; DROP TABLE x; --",
		"locks`; DROP TABLE x; --",
		"1locks",
		"lo-cks",
		"a.b.c",
		".locks",
		"locks.",
		"lócks",
		"locks\x00",
		strings.Repeat("l", 64),
	}
	for _, table := range bad {
		_, err := (&Options{Table: table}).WithDefaults()
		require.ErrorIs(t, err, distlock.ErrInvalid, "Options{Table: %q}", table)
		require.Contains(t, err.Error(), "Options.Table")
	}
	good := map[string]string{
		"":                      `"distlock_leases"`,
		"locks":                 `"locks"`,
		"Locks_2":               `"Locks_2"`,
		"_x":                    `"_x"`,
		"app.locks":             `"app"."locks"`,
		strings.Repeat("l", 63): `"` + strings.Repeat("l", 63) + `"`,
	}
	for table, want := range good {
		o, err := (&Options{Table: table}).WithDefaults()
		require.NoError(t, err, "Options{Table: %q}", table)
		require.Equal(t, want, sqldialect.QuoteTable(o.Table, '"'))
	}
	require.Equal(t, "`app`.`locks`", sqldialect.QuoteTable("app.locks", '`'))
	for _, o := range []Options{
		{Owner: strings.Repeat("o", MaxOwnerLen+1)},
		{Owner: "bad\xff"},
		{Owner: "nul\x00"},
		{CleanupTimeout: -time.Nanosecond},
		{EndSessionTimeout: -time.Nanosecond},
	} {
		_, err := o.WithDefaults()
		require.ErrorIs(t, err, distlock.ErrInvalid, "%+v", o)
	}
	o, err := (*Options)(nil).WithDefaults()
	require.NoError(t, err)
	require.Equal(t, Options{
		Table:             DefaultTable,
		Owner:             driver.DefaultOwner(),
		CleanupTimeout:    DefaultCleanupTimeout,
		EndSessionTimeout: DefaultEndSessionTimeout,
	}, o)
	o, err = (&Options{Owner: strings.Repeat("o", MaxOwnerLen), CleanupTimeout: time.Second}).WithDefaults()
	require.NoError(t, err)
	require.Equal(t, time.Second, o.CleanupTimeout)
}
