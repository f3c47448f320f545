package egress

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// epoch anchors activity times to the monotonic clock.
var epoch = time.Now()

func sinceEpoch() time.Duration { return time.Since(epoch) }

// activity is when bytes last moved either way on one session's
// connections (the sandbox side and the upstream side share one).
type activity struct{ last atomic.Int64 }

func (a *activity) touch()                 { a.last.Store(int64(sinceEpoch())) }
func (a *activity) idleFor() time.Duration { return sinceEpoch() - time.Duration(a.last.Load()) }

// meterConn counts the bytes read and written on a connection and ends it
// after it has been idle: a read or write fails with a timeout only when no
// byte moved either way on the session for the idle time (so a long
// download with a quiet upload direction lives on). Reads may also have a
// hard limit (for request headers).
//
// Read and Write may run concurrently with each other, but not with
// themselves: the deadline bookkeeping of each side belongs to the one
// goroutine using it.
type meterConn struct {
	net.Conn
	act  *activity
	idle time.Duration

	read, written atomic.Int64

	// cpu is charged for what moves on the sandbox's side, and waited
	// on before each read and write there; nil on the upstream side.
	cpu       *cpuBudget
	lastRead  int           // bytes the latest Read returned
	closed    chan struct{} // closed by Close: ends a wait for the budget
	closeOnce sync.Once

	rdHard  time.Time     // reads fail after this; zero = no limit
	rdArmed time.Duration // sinceEpoch when the read deadline was set; <0 = set it on the next Read
	wrArmed time.Duration // the same for writes
}

func newMeterConn(c net.Conn, act *activity, idle time.Duration) *meterConn {
	return &meterConn{Conn: c, act: act, idle: idle, rdArmed: -1, wrArmed: -1, closed: make(chan struct{})}
}

// Close closes the connection and ends a Read or Write waiting for the
// budget.
func (c *meterConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// setReadLimit sets (or, with the zero time, clears) a hard limit on
// reads. Call it only from the goroutine that reads.
func (c *meterConn) setReadLimit(t time.Time) {
	if !t.IsZero() {
		// The reader may hold a header read before its limit was set,
		// charged then as relayed bytes: the latest read's are charged
		// again as header.
		c.cpu.charge(requestCost + int64(c.lastRead)*(headerByteCost-relayByteCost))
	}
	c.rdHard = t
	c.rdArmed = -1
}

// armRead sets the read deadline unless it was set recently: moving a
// deadline on every call would cost more than the copy it guards.
func (c *meterConn) armRead() {
	t := sinceEpoch()
	if c.rdArmed >= 0 && t-c.rdArmed < c.idle/8 && c.rdHard.IsZero() {
		return
	}
	dl := time.Now().Add(c.idle)
	if !c.rdHard.IsZero() && c.rdHard.Before(dl) {
		dl = c.rdHard
	}
	_ = c.Conn.SetReadDeadline(dl)
	c.rdArmed = t
}

func (c *meterConn) armWrite() {
	t := sinceEpoch()
	if c.wrArmed >= 0 && t-c.wrArmed < c.idle/8 {
		return
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	c.wrArmed = t
}

func (c *meterConn) Read(b []byte) (int, error) {
	for {
		c.cpu.wait(c.closed)
		c.armRead()
		n, err := c.Conn.Read(b)
		c.lastRead = n
		if n > 0 {
			if c.rdHard.IsZero() {
				c.cpu.charge(relayCost(n))
			} else {
				c.cpu.charge(ioCost + int64(n)*headerByteCost)
			}
			c.read.Add(int64(n))
			c.act.touch()
		}
		if n == 0 && err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.readMayWait() {
			c.rdArmed = -1
			continue
		}
		return n, err
	}
}

// waitReadable waits, under the same deadlines as Read, until a Read
// would not block, without a buffer to read into: a connection that waits
// for data holds none. A connection that cannot be waited on so returns at
// once.
func (c *meterConn) waitReadable() error {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	for {
		c.armRead()
		err := rc.Read(readable)
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.readMayWait() {
			c.rdArmed = -1
			continue
		}
		return err
	}
}

func (c *meterConn) readMayWait() bool {
	if !c.rdHard.IsZero() && !time.Now().Before(c.rdHard) {
		return false
	}
	return c.act.idleFor() < c.idle
}

func (c *meterConn) Write(b []byte) (int, error) {
	total := 0
	for {
		c.cpu.wait(c.closed)
		c.armWrite()
		n, err := c.Conn.Write(b[total:])
		if n > 0 {
			c.cpu.charge(relayCost(n))
			total += n
			c.written.Add(int64(n))
			c.act.touch()
		}
		if err != nil && total < len(b) && errors.Is(err, os.ErrDeadlineExceeded) && c.act.idleFor() < c.idle {
			c.wrArmed = -1
			continue
		}
		return total, err
	}
}

// CloseWrite shuts the write side down (a FIN), or closes the connection
// if it cannot half-close.
func (c *meterConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// isTimeout reports whether err is a timeout of a network operation.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
