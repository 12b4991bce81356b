// Package postgres is Kith's one store: every frontend (HKP, recon, web,
// SSH lookups) reads and writes through it, and only it speaks SQL.
//
// It owns the pgx connection pool, the versioned SQL migrations embedded in
// the binary, and the queries behind the store interfaces. It does not start
// PostgreSQL servers (package embedded does) and holds no node-local state:
// many Kith nodes may share one database.
package postgres
