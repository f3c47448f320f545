package seccompprofile

import (
	"errors"
	"strconv"
)

// ErrInvalid is matched (with errors.Is) by every error about a
// seccomp profile that [FromOCI] or [FromDocker] cannot convert.
// The error is an *[Error] naming the field.
var ErrInvalid = errors.New("invalid seccomp profile")

// Error is a field of a seccomp profile that is malformed or asks for
// what the sandbox cannot do. It matches ErrInvalid.
type Error struct {
	// Field is the field's path in the profile's JSON, e.g.
	// "syscalls[3].args[0].op"; empty for the profile as a whole.
	Field string
	// Value is the offending value as the profile spells it, if there is
	// one to show.
	Value string
	// Reason says what is wrong, starting with a verb: "is not a
	// comparison".
	Reason string
}

func (e *Error) Error() string {
	s := "sandbox: seccomp profile"
	if e.Field != "" {
		s += ": " + e.Field + ":"
	}
	if e.Value != "" {
		s += " " + strconv.Quote(e.Value)
	}
	return s + " " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
