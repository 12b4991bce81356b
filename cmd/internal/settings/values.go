package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as in Go ("60s", "1m30s"), in a
// file, a variable or a flag.
type Duration time.Duration

// UnmarshalText parses a duration such as "60s"; a negative one is
// refused.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("negative duration %s", b)
	}
	*d = Duration(v)
	return nil
}

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// StringList is a list of strings: a TOML array, or comma-separated in a
// flag or variable.
type StringList []string

// StringValue is a string setting's flag.Value: (*StringValue)(&c.Field).
type StringValue string

// String returns the value.
func (v *StringValue) String() string { return string(*v) }

// Set takes s as it is.
func (v *StringValue) Set(s string) error { *v = StringValue(s); return nil }

// IntValue is an int setting's flag.Value.
type IntValue int

// String formats the number in decimal.
func (v *IntValue) String() string { return strconv.Itoa(int(*v)) }

// Set parses a whole number.
func (v *IntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*v = IntValue(n)
	return nil
}

// BoolValue is a bool setting's flag.Value; its flag needs no argument.
type BoolValue bool

// String formats the value as "true" or "false".
func (v *BoolValue) String() string { return strconv.FormatBool(bool(*v)) }

// IsBoolFlag lets the flag stand alone (--flag for --flag=true).
func (v *BoolValue) IsBoolFlag() bool { return true }

// Set parses what strconv.ParseBool accepts.
func (v *BoolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v = BoolValue(b)
	return nil
}

// ListValue is a StringList setting's flag.Value.
type ListValue StringList

// String joins the list with commas.
func (v *ListValue) String() string { return strings.Join(*v, ",") }

// Set splits s at commas, trimming spaces and dropping empty items.
func (v *ListValue) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*v = out
	return nil
}

// DurationValue is a Duration setting's flag.Value.
type DurationValue Duration

// String formats the duration as time.Duration does.
func (v *DurationValue) String() string { return Duration(*v).String() }

// Set parses a duration as Duration.UnmarshalText does.
func (v *DurationValue) Set(s string) error {
	var d Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		return err
	}
	*v = DurationValue(d)
	return nil
}
