package report

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// Denial is one syscall the seccomp policy refused during a run, and how
// often. In JSON its Errno is its name, e.g. "EPERM", or "errno N" for a
// number without one.
type Denial struct {
	Syscall string        `json:"syscall"` // e.g. "ptrace", or "syscall_999" for a number without a name
	Errno   syscall.Errno `json:"errno"`   // what the program got back
	Count   int           `json:"count"`
}

// denialJSON is a Denial with its Errno as text.
type denialJSON struct {
	plainDenial
	Errno string `json:"errno"`
}

// plainDenial is a Denial without its methods, for denialJSON.
type plainDenial Denial

// MarshalJSON writes d with its Errno's name.
func (d Denial) MarshalJSON() ([]byte, error) {
	return json.Marshal(denialJSON{plainDenial(d), ErrnoName(d.Errno)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Denial) UnmarshalJSON(b []byte) error {
	var j denialJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	e, err := ParseErrno(j.Errno)
	if err != nil {
		return err
	}
	*d = Denial(j.plainDenial)
	d.Errno = e
	return nil
}

// ErrnoName returns an errno's symbolic name, e.g. "EPERM", or "errno N"
// for a number without one.
func ErrnoName(e syscall.Errno) string {
	if name := errnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", uint(e))
}

// ParseErrno returns the errno ErrnoName named name.
func ParseErrno(name string) (syscall.Errno, error) {
	if n, ok := strings.CutPrefix(name, "errno "); ok {
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("report: errno %q: %w", name, err)
		}
		return syscall.Errno(v), nil
	}
	if e := errnoValue(name); e != 0 {
		return e, nil
	}
	return 0, fmt.Errorf("report: errno %q: not a name this system knows", name)
}
