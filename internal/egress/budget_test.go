package egress

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCPUBudgetBackpressure puts a proxy's budget deep in debt and checks
// that the proxy then neither accepts nor reads: a CONNECT gets no answer,
// and the connection is only ended, at once, by Close.
func TestCPUBudgetBackpressure(t *testing.T) {
	echo := echoServer(t)
	tp := startProxy(t, []string{"127.0.0.0/8:1-65535"}, nil, func(p *Proxy) { p.CPUs = 0.01 })
	// A tunnel opened within the burst works.
	if err := tunnelEcho(tp.addr, echo.Addr().String(), 1<<10); err != nil {
		t.Fatalf("tunnel within the burst: %v", err)
	}
	tp.cpu.charge(int64(time.Hour))

	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", echo.Addr())
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	line, err := bufio.NewReader(c).ReadString('\n')
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("CONNECT with the budget an hour in debt was answered: %q %v", line, err)
	}

	closed := make(chan struct{})
	go func() { tp.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait for the budget")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after Close the connection still reads: %d %v", n, err)
	}
}

// TestCPUBudgetRefills checks the bucket's arithmetic: it starts with
// CPUBurst, goes into debt by what is charged, earns CPUShare of the CPUs
// a second, and saves up no more than CPUBurst.
func TestCPUBudgetRefills(t *testing.T) {
	if newCPUBudget(0, nil) != nil || newCPUBudget(-1, nil) != nil {
		t.Error("a budget for no CPU limit, want none")
	}
	var nilBudget *cpuBudget
	nilBudget.charge(1)
	nilBudget.wait(nil)

	b := newCPUBudget(2, nil)
	if b.tokens != float64(CPUBurst) {
		t.Errorf("starts with %v, want CPUBurst %v", b.tokens, CPUBurst)
	}
	b.charge(int64(CPUBurst) + int64(time.Millisecond))
	if b.tokens > 0 {
		t.Errorf("after charging more than the burst: %v tokens, want a debt", b.tokens)
	}
	b.mu.Lock()
	b.tokens, b.last = 0, b.last-time.Second
	b.refill()
	want := 2 * CPUShare * float64(time.Second)
	if b.tokens < want || b.tokens > want+float64(time.Millisecond) {
		t.Errorf("after 1 s at 2 CPUs: %v tokens, want about %v", b.tokens, want)
	}
	b.last -= time.Hour
	b.refill()
	if b.tokens != float64(CPUBurst) {
		t.Errorf("after an hour: %v tokens, want CPUBurst", b.tokens)
	}
	b.mu.Unlock()
}

// TestCPUBudgetWaitEndsOnClose: a read waiting for the budget ends when
// its connection is closed, without waiting for the refill, so a session
// that ended holds no goroutine for the budget's sake.
func TestCPUBudgetWaitEndsOnClose(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	var act activity
	c := newMeterConn(a, &act, time.Minute)
	c.cpu = newCPUBudget(0.01, nil)
	c.cpu.charge(int64(time.Hour))
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Read with the budget an hour in debt returned at once: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Read on a closed connection succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Read waiting for the budget")
	}
}

// TestQueuedConnectionsReported: connections the sandbox opened while the
// budget held the proxy back, still queued on the listener at Close, are
// each in the report.
func TestQueuedConnectionsReported(t *testing.T) {
	tp := startProxy(t, []string{"127.0.0.0/8:1-65535"}, nil, func(p *Proxy) { p.CPUs = 0.01 })
	tp.init() // Serve may not have made the budget yet
	tp.cpu.charge(int64(time.Hour))
	const n = 20
	for range n {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	tp.Close()
	report := tp.Report()
	if len(report) != n {
		t.Fatalf("%d connections opened, %d reported: %+v", n, len(report), report)
	}
	queued := 0
	for _, c := range report {
		if strings.Contains(c.Reason, "not accepted") {
			queued++
		}
	}
	// The first was accepted and waits for the budget; the rest queue.
	if queued < n-2 {
		t.Errorf("%d of %d reported as never accepted, want at least %d: %+v", queued, n, n-2, report)
	}
}
