// Package image keeps a store of container images on the host and gives
// each pulled image a root directory a sandbox can use as its read-only
// filesystem. It runs in the caller's process (the program that imports
// the sandbox library), never in a sandbox: it fetches and unpacks what a
// sandbox will run, before the sandbox exists.
//
// # Overview
//
//	s, err := image.Open(dir)              // e.g. image.DefaultDir()
//	img, err := s.Pull(ctx, "docker.io/library/python:3.12-slim", image.PullOptions{})
//	lease, err := s.Use(ctx, img)          // img.Root stays until lease.Close
//	...
//	freed, err := s.Prune(ctx, func(img image.Image) bool { return img.Ref == "..." })
//
// References use the transport names skopeo and podman users know: a
// registry reference, oci:DIR[:TAG], oci-archive:FILE[:TAG] and
// docker-archive:FILE[:REF]. The formats and the registry protocol
// (authentication, retries, digests) are go-containerregistry's.
//
// # Threat model
//
// An image is as hostile as the program it holds. Its bytes are checked
// against their digests as they are read (the compressed layer against the
// manifest, the uncompressed one against the config's diff ID), and a
// layer is stored only if both match. A layer is unpacked through an
// os.Root, so no name, symlink or hard link in it reaches outside its
// directory; names that climb out, absolute names and hard links to
// missing files are refused; device nodes are dropped, set-uid and set-gid
// bits cleared, ownership not applied (see unpackTar); bytes fetched and
// bytes unpacked are bounded (PullOptions.MaxBytes, MaxUnpackedBytes), so
// a decompression bomb is an error. A registry reached over plain HTTP is
// refused unless the caller asked for it and the registry is on loopback.
// The caller and its options are trusted.
//
// # Registry mirrors
//
// PullOptions.Mirrors works as docker's registry-mirrors and the mirrors
// of containers' registries.conf: an image of a registry with mirrors is
// asked of each mirror in order, then of the registry itself. The image
// keeps the reference it was asked by: its record, its Ref and Prune's
// keep see the registry's name, never a mirror's.
//
// A mirror is trusted with nothing: what it serves is checked against the
// same digests as the registry's, so it can withhold an image but not
// change one. A reference by digest (name@sha256:...) must get
// exactly that manifest from a mirror. A reference by tag gets the image
// the first mirror that has the tag holds for it, as from a registry (and
// as docker and containerd do): a mirror is a cache, and a cache of a tag
// may lag behind the registry; name the digest to pin the image.
//
// What a mirror answers decides what comes next:
//   - it does not have the manifest (404, "manifest unknown"), refuses us
//     (401, 403, 429), fails (5xx), or cannot be reached (no route, refused
//     connection, DNS, TLS): the next mirror, then the registry, and the
//     error of the last one tried names the mirrors tried before;
//   - it serves a manifest that is not the digest asked for, or that is not
//     an image: an error, never the next, since a mirror that serves wrong
//     bytes is broken or hostile and silence would hide it;
//   - plain HTTP to it refused (see Insecure): an error, never the next.
//
// The mirror that served the manifest serves its config and layers too;
// one of them it then fails to serve fails the pull.
//
// Insecure's rule holds for each mirror as for the registry: plain HTTP
// only to one on a loopback address; any other is reached by HTTPS alone.
// Insecure is an error unless the registry or one of its mirrors is on
// loopback.
//
// # Layout of a store
//
//	lock                   flock: shared by pulls and Use, exclusive for Prune
//	tmp/                   work in progress, renamed into place when whole
//	layers/<diffID>/fs/    a layer unpacked, keyed by its diff ID
//	roots/<chainID>/       an image's filesystem, keyed by its layers' chain ID
//	images/<key>.json      one record per reference and platform
//
// Everything is made in tmp/ and renamed into place whole, so a pull that
// fails or is killed leaves nothing that is used; Open and Prune remove
// what it left when no pull is running. Two pulls of one image, in one
// process or two, both succeed and agree: the first rename wins and the
// other's work is discarded. A root in use is marked by a shared flock on
// its directory (a Lease): flocks end with their process, so a crashed
// sandbox never pins a root for ever.
//
// # Why hard-linked roots and not an overlay mount
//
// A root is one tree of hard links to the files of its unpacked layers,
// with whiteouts applied by leaving out what they delete: no file data is
// copied, and building a root costs a directory walk. An overlay mount of
// the layers would avoid even that, but its whiteouts are character device
// nodes or trusted.* xattrs, which an unprivileged user cannot make, and
// mounting an overlay in the sandbox's user namespace needs Linux 5.11 or
// later. The hard-linked tree works on every kernel and for every user; an
// overlay of it can come later where the kernel allows it. The root's
// files share inodes with the layers and with other roots, so a root must
// never be written: the sandbox binds it read-only.
//
// # Limitations
//
// Files belong to the store's owner, whatever the image says; a program
// that needs files of several owners sees them all as one. Every file is
// readable by everyone, and every directory searchable (see permOf), so
// that a sandbox whose user is not the store's owner can use it; the
// store's directory and its roots/ are searchable but not listable by
// other users, who can reach a root only by its chain ID, which only those
// who hold the image know. Names with
// a colon cannot be used as paths in oci: and docker-archive: references
// (the path ends at the first colon, as in skopeo). A docker archive has
// no manifest, so an image from one is named by its config's digest
// (docker's image ID). Whiteouts in a layer's own directory are kept as
// empty marker files; only roots are meant to be used. Every root adds a
// link to each file of its layers, and file systems bound the links of
// one inode (65,000 on ext4): tens of thousands of roots sharing a layer
// is the limit, and a pull past it fails with EMLINK. An Image's Root is
// only kept from Prune while a Lease from Store.Use holds it; between Pull
// and Use, keep decides.
package image
