package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"syscall"

	"github.com/klauspost/compress/zstd"
)

// counter counts the bytes read through it, fails once they pass limit
// (with ErrTooLarge, naming what) and reports progress.
type counter struct {
	r        io.Reader
	n, limit int64
	what     string
	ctx      context.Context
	h        hash.Hash // when set, hashes what is read
	progress func(int64)
	lastRep  int64
}

// progressStep is how many bytes pass between two progress reports.
const progressStep = 256 << 10

func (c *counter) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	if c.n > c.limit {
		return n, fmt.Errorf("%s: more than %d bytes: %w", c.what, c.limit, ErrTooLarge)
	}
	if c.progress != nil && (c.n-c.lastRep >= progressStep || (err == io.EOF && c.n != c.lastRep)) {
		c.lastRep = c.n
		c.progress(c.n)
	}
	return n, err
}

// decompress reads r as gzip, zstd or an uncompressed tar, by its first
// bytes: registries label layers, archives often do not, and a label that
// lies must not decide how bytes are read.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { z.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	default:
		return br, func() {}, nil
	}
}

// readError classifies an error met while reading an image's bytes: the
// caller's deadline, the transfer, or else the image itself (a digest or
// size that does not match, a truncated or corrupt stream).
func readError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadImage) || errors.Is(err, ErrTransfer) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return transferError(err)
	}
	return fmt.Errorf("%w: %w", ErrBadImage, err)
}

// transferError is err, a connection that broke, as ErrTransfer saying
// what to do.
func transferError(err error) error {
	return fmt.Errorf("%w (the connection to the registry broke; nothing of the image was stored: pull it again): %w", ErrTransfer, err)
}

// brokenTransfer says whether err, read from a registry's response, is
// the connection breaking rather than what the registry sent: the body
// ending before its length (net/http's io.ErrUnexpectedEOF), a reset, a
// network error. A body that ends where it says it does but does not
// match its digest is the image's fault, and not one of these.
func brokenTransfer(err error) bool {
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// remoteStream is a blob's body from a registry, whose read errors that
// are the connection breaking match ErrTransfer. It sits beneath the
// decompressor, so that a stream cut short is told from a compressed
// stream that is itself truncated (which reads as the same
// io.ErrUnexpectedEOF from gzip).
type remoteStream struct{ io.ReadCloser }

func (r remoteStream) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF && brokenTransfer(err) {
		err = transferError(err)
	}
	return n, err
}

func newSHA256() hash.Hash { return sha256.New() }
