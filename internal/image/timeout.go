package image

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout is PullOptions.Timeout's default, 10 minutes. A pull
// needs a bound of its own because a registry that stalls (accepts the
// connection and sends nothing, or a byte a minute) would otherwise hold
// its caller for as long as ctx allows, which for a Sandbox filling its
// pool is for ever. Ten minutes fetches a few gigabytes on a link of
// 100 Mbit/s, more than most images are; a larger image or a slower link
// needs a longer Timeout.
const DefaultTimeout = 10 * time.Minute

// errPullTimedOut is the cause of a pull's own deadline, to tell it from
// ctx's.
var errPullTimedOut = errors.New("pull timeout")

// pullWithin runs pull with o.Timeout on top of ctx. A pull that runs out
// of it fails with a *TimeoutError; pull's own cleanup (it removes its
// work when it fails) is what leaves the store as it was.
func (s *Store) pullWithin(ctx context.Context, ref string, o PullOptions,
	pull func(context.Context, string, PullOptions) (*Image, error)) (*Image, error) {
	tctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, errPullTimedOut)
	defer cancel()
	img, err := pull(tctx, ref, o)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), errPullTimedOut) {
		return nil, &TimeoutError{Ref: ref, Timeout: o.Timeout, Err: err}
	}
	return img, err
}

// TimeoutError is a pull that took longer than PullOptions.Timeout. It
// matches ErrTimeout and context.DeadlineExceeded.
type TimeoutError struct {
	Ref     string
	Timeout time.Duration
	// Err is what the pull was doing when its time ran out, e.g. reading
	// a layer.
	Err error
}

func (e *TimeoutError) Error() string {
	// The pull's error names the image too.
	inner := strings.ReplaceAll(e.Err.Error(), "image "+e.Ref+": ", "")
	return fmt.Sprintf("image %s: pull timed out after %v (%s)", e.Ref, e.Timeout, inner)
}

// Unwrap gives the sentinels only: the pull's own error at that moment is
// the deadline's, whatever it was reading.
func (e *TimeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }
