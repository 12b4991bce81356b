package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// listen LISTENs on channel over a connection of its own (so it holds none
// of the pool's) and calls fn with each payload, from one goroutine, until
// ctx ends or the connection fails; then it returns the error. It closes
// ready (if not nil) once it listens. Notifications committed while nobody
// listens are not replayed.
func (s *Store) listen(ctx context.Context, channel string, ready chan<- struct{}, fn func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: listen %s: %w", channel, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: listen %s: %w", channel, err)
	}
	if ready != nil {
		close(ready)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("postgres: listen %s: %w", channel, err)
		}
		fn(n.Payload)
	}
}
