package egress

import (
	"bytes"
	"errors"
	"io"
)

// errHeaderTooLarge ends a header that outgrew maxHeaderBytes, and
// errTooManyFields one of more than maxHeaderFields lines.
var (
	errHeaderTooLarge = errors.New("header too large")
	errTooManyFields  = errors.New("too many header fields")
)

// readHeader reads from r into buf until buf holds a whole HTTP header (a
// start line, fields, an empty line), checking the limits on the raw bytes
// as they come, before anything parses them: a parser allocates for each
// field, which is what a header of many tiny fields would multiply. It
// returns the header's length and how many bytes it read; those past the
// header are what followed it. A header that does not fit in buf fails
// with errHeaderTooLarge, one of more than maxFields lines after the start
// line with errTooManyFields, and a stream that ends before the header did
// with io.EOF if nothing came, else io.ErrUnexpectedEOF.
func readHeader(r io.Reader, buf []byte, maxFields int) (end, n int, err error) {
	lineStart, lines := 0, 0
	for {
		// Scan what arrived for line ends.
		for {
			i := bytes.IndexByte(buf[lineStart:n], '\n')
			if i < 0 {
				break
			}
			line := buf[lineStart : lineStart+i]
			lineStart += i + 1
			if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
				return lineStart, n, nil
			}
			if lines++; lines > maxFields+1 {
				return 0, n, errTooManyFields
			}
		}
		if n == len(buf) {
			return 0, n, errHeaderTooLarge
		}
		m, rerr := r.Read(buf[n:])
		n += m
		if rerr != nil && m == 0 {
			if rerr == io.EOF && n > 0 {
				rerr = io.ErrUnexpectedEOF
			}
			return 0, n, rerr
		}
	}
}

// carryReader reads what was read ahead of a header first, then r.
type carryReader struct {
	carry []byte
	r     io.Reader
}

func (c *carryReader) Read(b []byte) (int, error) {
	if len(c.carry) > 0 {
		n := copy(b, c.carry)
		c.carry = c.carry[n:]
		if len(c.carry) == 0 {
			c.carry = nil
		}
		return n, nil
	}
	return c.r.Read(b)
}

// unread puts b back in front of what is still to be read.
func (c *carryReader) unread(b []byte) {
	if len(b) > 0 {
		c.carry = append(bytes.Clone(b), c.carry...)
	}
}
