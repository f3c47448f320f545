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
// bits cleared, ownership not applied, and every extended attribute of a
// layer dropped: file capabilities (security.capability) as set-id bits
// are, and user.* too, user.overlay.* above all, which would otherwise
// steer the overlay of the layers (see unpackTar); bytes fetched and
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
//	probes/<boot ID>/<key> what callers found probing the host with layers
//
// Everything is made in tmp/ and renamed into place whole, so a pull that
// fails or is killed leaves nothing that is used; Open and Prune remove
// what it left when no pull is running. Two pulls of one image, in one
// process or two, both succeed and agree: the first rename wins and the
// other's work is discarded. A root in use is marked by a shared flock on
// its directory (a Lease): flocks end with their process, so a crashed
// sandbox never pins a root for ever.
//
// # Overlay, and the hard-linked fallback
//
// Every image has a hard-linked root, roots/<chainID>/: one tree of hard
// links to the files of its unpacked layers, with whiteouts applied by
// leaving out what they delete. No file data is copied; building it costs
// a directory walk at pull, once per image, and it works on every kernel
// and for every user. It is the tree the caller's side reads (the planner
// reads its top-level entries and /etc, the trust bundle is looked for in
// it), the directory a Lease flocks and Prune checks, and the sandbox's
// root where no overlay can be had. Its files share inodes with the
// layers and with other roots, so it must never be written: the sandbox
// binds it read-only.
//
// Where the kernel allows it, the sandbox's root is instead a read-only
// overlay of the image's layers (Image.Layers, top first: lowerdir only,
// with userxattr), mounted by the sandbox's init in its user namespace.
// That needs:
//
//   - each layer stored in overlay form (layerForm): its whiteouts as
//     character devices 0/0, which any user may make since Linux 5.8, and
//     its opaque directories marked with the xattr user.overlay.opaque=y,
//     which the store's file system must keep (ext4, xfs, btrfs, and tmpfs
//     since 6.6 do). A probe in each layer's directory as it is unpacked
//     decides; where either is refused the layer keeps marker files
//     (.wh.NAME, .wh..wh..opq) as layers stored by older versions do, and
//     an image with any such layer always uses its hard-linked root;
//   - Linux 5.11 or later, for overlayfs in a user namespace and its
//     userxattr option, and a store the sandbox's user can reach (its
//     layers/ is searchable as roots/ is). A child cloned with the
//     sandbox's ids decides, by mounting the image's layers as the init
//     would, once per image, sandbox user and boot of the kernel: its
//     answer is kept in probes/ (Image.CacheProbe), for that boot and
//     those very layer directories, so that later processes (each
//     command-line run is one) start no child;
//   - two layers at least, since overlayfs takes no fewer lower
//     directories without an upper one (an image of one layer has the
//     hard-linked root, at no more cost), and at most 88, the names the
//     init gives them ("0:1:...") filling the 255 bytes fsconfig takes for
//     lowerdir.
//
// Both roots are the same tree: the hard-linked builder reads both forms,
// and a whiteout deletes only what the layers below have, as the OCI spec
// says and overlayfs does (in overlay form, a directory that meets its own
// layer's whiteout is made opaque). No whiteout device ever appears in a
// root. What the overlay costs: two mounts per sandbox start (a tmpfs that
// names the layers, and the overlay) and one probe child per image and
// sandbox user in each boot.
// What it gives is the kernel's merge of the layers themselves, with no
// tree of links between them and the sandbox. The hard-linked root is
// still built at pull for every image, since the caller's side reads it;
// building only what that side reads (the top-level entries and /etc)
// would spare overlay users the walk and the links, but a link in /etc to
// elsewhere in the image would then be read from a tree that lacks it.
//
// # Limitations
//
// Files belong to the store's owner, whatever the image says; a program
// that needs files of several owners sees them all as one. Every file is
// readable by everyone, and every directory searchable (see permOf), so
// that a sandbox whose user is not the store's owner can use it; the
// store's directory, its roots/ and its layers/ are searchable but not listable by
// other users, who can reach a root only by its chain ID, which only those
// who hold the image know. Names with
// a colon cannot be used as paths in oci: and docker-archive: references
// (the path ends at the first colon, as in skopeo). A docker archive has
// no manifest, so an image from one is named by its config's digest
// (docker's image ID). Whiteouts in a layer's own directory are kept in
// its form (see above); only roots and overlays of whole images are meant
// to be used. Every root adds a
// link to each file of its layers, and file systems bound the links of
// one inode (65,000 on ext4): tens of thousands of roots sharing a layer
// is the limit, and a pull past it fails with EMLINK. An Image's Root is
// only kept from Prune while a Lease from Store.Use holds it; between Pull
// and Use, keep decides.
package image
