// Package settings is the machinery of one table of settings that feeds
// a TOML file, environment variables and flags alike.
//
// A program lists its scalar settings once, as a [Table] of [Setting]s,
// each with its TOML key, a usage line and a binding to its field in the
// program's configuration struct. [Table.Load] then registers a flag per
// setting, reads the file, the environment and the flags, and applies
// them in rising precedence: defaults, file, environment, flags. The
// file is decoded into the same struct, so it may also hold tables that
// have no flag or variable.
//
// The package owns the precedence, the naming of flags and variables,
// the typed flag values ([StringValue], [IntValue], [BoolValue],
// [ListValue], [DurationValue]) and a few checks settings share
// ([CheckHostPort], [CheckLoopback]). It does not own any program's
// settings: those, their defaults and their validation stay with the
// program.
package settings
