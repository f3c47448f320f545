package workspace

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxSparseExtents bounds the data extents of one sparse file that
// WriteTar maps (16 bytes each); beyond them the rest of the file goes
// out whole.
const maxSparseExtents = 4096

// maxLinkNames bounds the bytes of names WriteTar keeps for files with
// more hard links still to come; beyond it, further such files go out as
// copies (still within the content limit).
const maxLinkNames = 8 << 20

// SetSize sets the most bytes of file content the workspace holds, which
// WriteTar never writes and ExtractTar never reads past; 0 (the default) takes the size of the file
// system the root is on.
func (r *Root) SetSize(n int64) { r.size.Store(n) }

// contentLimit is the most file content WriteTar writes from the tree at
// fd.
func (r *Root) contentLimit(fd int) int64 {
	if n := r.size.Load(); n > 0 {
		return n
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil || st.Blocks == 0 {
		return 1 << 62
	}
	return int64(st.Blocks) * st.Bsize
}

// linkSeen is the first name written of a file with more hard links.
type linkSeen struct {
	name string
	left uint64 // links not yet written
}

// tarWriter is the state of one WriteTar.
type tarWriter struct {
	w     io.Writer
	tw    *tar.Writer
	links map[devIno]*linkSeen
	names int   // bytes of names in links
	left  int64 // file content that may still be written
	limit int64
	buf   []byte // for copying content, one for the whole stream
}

// WriteTar writes the tree at name to w as a tar stream: directories,
// regular files and symlinks (as symlinks), with their modes and times;
// names are relative to name. Devices, FIFOs and sockets are skipped. A
// file with several hard links goes out once, its other names as tar
// hard links to the first; a sparse file goes out as its data (GNU's PAX
// sparse format 1.0, which GNU tar and archive/tar read), not its holes.
//
// What it costs is bounded whatever the program left: at most
// MaxDescriptors at any depth; memory for one path, a small frame per
// level and the listings of the directories on it; an entry name of at
// most MaxTarPath bytes (a longer one stops the stream with an error
// matching ENAMETOOLONG); and at most the workspace's size (SetSize) of
// file content, beyond which, as when files grow while being written, it
// stops with an error.
func (r *Root) WriteTar(w io.Writer, name string) error {
	rel, err := clean(name)
	if err != nil {
		return r.pathErr("tar", name, err)
	}
	t := &tarWriter{w: w, tw: tar.NewWriter(w), links: map[devIno]*linkSeen{}, buf: make([]byte, 32<<10)}
	err = r.walk(rel, func(dfd int, n string, p []byte, e Entry) error {
		if len(p) == 0 {
			if t.limit == 0 {
				t.limit = r.contentLimit(dfd)
				t.left = t.limit
			}
			return nil
		}
		if len(p) > MaxTarPath {
			return fmt.Errorf("%s: a path of %d bytes, longer than the %d (PATH_MAX) a tar entry may have: %w",
				shortPath(p), len(p), MaxTarPath, unix.ENAMETOOLONG)
		}
		return t.entry(dfd, n, string(p), e)
	})
	if err != nil {
		return r.pathErr("tar", name, err)
	}
	return t.tw.Close()
}

func (t *tarWriter) entry(dfd int, n, p string, e Entry) error {
	hdr := &tar.Header{Name: p, Mode: int64(fileMode(goMode(e.Mode))),
		ModTime: e.ModTime, Format: tar.FormatPAX}
	switch {
	case e.Mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		return t.tw.WriteHeader(hdr)
	case e.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		return t.tw.WriteHeader(hdr)
	case !e.Mode.IsRegular():
		return nil
	}
	f, err := openFileAt(dfd, n)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if st.Nlink > 1 {
		id := devIno{uint64(st.Dev), st.Ino}
		if seen := t.links[id]; seen != nil {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, seen.name
			if seen.left--; seen.left == 0 {
				delete(t.links, id)
				t.names -= len(seen.name)
			}
			return t.tw.WriteHeader(hdr)
		}
		if t.names+len(p) <= maxLinkNames {
			t.links[id] = &linkSeen{name: p, left: uint64(st.Nlink) - 1}
			t.names += len(p)
		}
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if st.Blocks*512 < st.Size {
		if ext, err := extents(int(f.Fd()), st.Size); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		} else if ext != nil {
			return t.sparse(f, hdr, ext)
		}
	}
	if err := t.charge(p, st.Size); err != nil {
		return err
	}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file the program is still writing may grow or shrink; the
	// header's size is what goes out.
	return t.copyOut(t.tw, f, 0, hdr.Size)
}

// charge counts n bytes of file content against the limit.
func (t *tarWriter) charge(p string, n int64) error {
	if t.left -= n; t.left < 0 {
		return fmt.Errorf("%s: the tar's file content would exceed the %d bytes the workspace holds (files changed while being written?): %w",
			p, t.limit, unix.EFBIG)
	}
	return nil
}

// copyOut writes n bytes of f from off to w, zeros past f's end.
func (t *tarWriter) copyOut(w io.Writer, f *os.File, off, n int64) error {
	c, err := io.CopyBuffer(w, io.NewSectionReader(f, off, n), t.buf)
	if err == nil && c < n {
		_, err = io.CopyBuffer(w, io.LimitReader(zeros{}, n-c), t.buf)
	}
	return err
}

// extent is a run of data in a sparse file.
type extent struct{ off, len int64 }

// extents maps the data of the file fd of size bytes with SEEK_DATA and
// SEEK_HOLE; nil if it has no hole after all (or the file system cannot
// tell).
func extents(fd int, size int64) ([]extent, error) {
	var out []extent
	var data int64
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err != nil {
			return nil, nil
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, nil
		}
		end = min(end, size)
		if start >= end {
			break
		}
		if len(out) == maxSparseExtents-1 {
			// Bounded: the rest goes out whole.
			end = size
		}
		out = append(out, extent{start, end - start})
		data += end - start
		off = end
	}
	if data >= size {
		return nil, nil
	}
	if n := len(out); n == 0 || out[n-1].off+out[n-1].len < size {
		// GNU tar sets the file's size from the last extent.
		out = append(out, extent{size, 0})
	}
	return out, nil
}

// sparse writes the regular file f as a PAX 1.0 GNU sparse entry: a PAX
// header with the real name and size, then an entry whose content is
// the map of extents followed by their data. archive/tar keeps GNU.sparse
// records out of the headers it writes, so these two are written here.
func (t *tarWriter) sparse(f *os.File, hdr *tar.Header, ext []extent) error {
	var data int64
	m := strconv.AppendInt(nil, int64(len(ext)), 10)
	m = append(m, '\n')
	for _, e := range ext {
		m = strconv.AppendInt(m, e.off, 10)
		m = append(m, '\n')
		m = strconv.AppendInt(m, e.len, 10)
		m = append(m, '\n')
		data += e.len
	}
	m = append(m, make([]byte, pad(int64(len(m))))...)
	if err := t.charge(hdr.Name, data); err != nil {
		return err
	}
	var rec []byte
	for _, kv := range [][2]string{
		{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"},
		{"GNU.sparse.name", hdr.Name}, {"GNU.sparse.realsize", strconv.FormatInt(hdr.Size, 10)},
	} {
		rec = append(rec, paxRecord(kv[0], kv[1])...)
	}
	if err := t.tw.Flush(); err != nil {
		return err
	}
	x := ustarHeader("./PaxHeaders/GNUSparseFile", tar.TypeXHeader, 0o644, int64(len(rec)), hdr.ModTime)
	body := ustarHeader("./GNUSparseFile.0/file", tar.TypeReg, hdr.Mode, int64(len(m))+data, hdr.ModTime)
	for _, b := range [][]byte{x[:], rec, make([]byte, pad(int64(len(rec)))), body[:], m} {
		if _, err := t.w.Write(b); err != nil {
			return err
		}
	}
	for _, e := range ext {
		if err := t.copyOut(t.w, f, e.off, e.len); err != nil {
			return err
		}
	}
	_, err := t.w.Write(make([]byte, pad(data)))
	return err
}

// pad is the zeros that round n up to a tar block.
func pad(n int64) int64 { return -n & 511 }

// paxRecord is one PAX extended header record: "len key=value\n", where
// len counts the whole record, itself included.
func paxRecord(k, v string) []byte {
	n := len(k) + len(v) + 3 // ' ', '=', '\n'
	l := n + len(strconv.Itoa(n))
	if len(strconv.Itoa(l)) > len(strconv.Itoa(n)) {
		l++
	}
	return []byte(strconv.Itoa(l) + " " + k + "=" + v + "\n")
}

// ustarHeader is a POSIX ustar header block; a size too large for its
// octal field is stored base-256, as GNU tar and archive/tar read it.
func ustarHeader(name string, typ byte, mode, size int64, mtime time.Time) [512]byte {
	var b [512]byte
	octal := func(field []byte, v int64) {
		s := strconv.FormatInt(v, 8)
		for len(s) < len(field)-1 {
			s = "0" + s
		}
		copy(field, s)
	}
	copy(b[0:100], name)
	octal(b[100:108], mode&0o7777)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	if size < 1<<33 {
		octal(b[124:136], size)
	} else {
		f := b[124:136]
		for i := len(f) - 1; i > 0; i-- {
			f[i] = byte(size)
			size >>= 8
		}
		f[0] = 0x80
	}
	octal(b[136:148], max(mtime.Unix(), 0))
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	octal(b[148:155], sum)
	b[154], b[155] = 0, ' '
	return b
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
