package mysql

import (
	"context"
	"database/sql"
	"reflect"
	"runtime"
	"sync"
	"weak"
)

// connIDs caches the connection id (CONNECTION_ID()) of each driver connection of
// a *sql.DB, asked once per connection, so that an acquire knows, before its
// statement is sent, which session to end if its outcome is unknown. The keys are
// weak: an entry goes when its driver connection has been closed and collected.
// The zero value is ready to use.
type connIDs struct {
	mu  sync.Mutex
	ids map[weak.Pointer[byte]]int64
}

// of returns the connection id of c's driver connection.
func (m *connIDs) of(ctx context.Context, c *sql.Conn) (int64, error) {
	var p *byte // the driver connection's object, only as an identity
	_ = c.Raw(func(dc any) error {
		if v := reflect.ValueOf(dc); v.Kind() == reflect.Pointer && !v.IsNil() {
			p = (*byte)(v.UnsafePointer())
		}
		return nil
	})
	var key weak.Pointer[byte]
	if p != nil {
		key = weak.Make(p)
		m.mu.Lock()
		id, ok := m.ids[key]
		m.mu.Unlock()
		if ok {
			return id, nil
		}
	}
	var id int64
	if err := c.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		return 0, err
	}
	if p == nil {
		return id, nil // a driver connection that is not a pointer: asked every time
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ids[key]; !ok {
		if m.ids == nil {
			m.ids = make(map[weak.Pointer[byte]]int64)
		}
		m.ids[key] = id
		runtime.AddCleanup(p, m.forget, key)
	}
	return id, nil
}

func (m *connIDs) forget(key weak.Pointer[byte]) {
	m.mu.Lock()
	delete(m.ids, key)
	m.mu.Unlock()
}
