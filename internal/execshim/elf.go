package execshim

import "encoding/binary"

// The ELF file: its header, a PT_LOAD segment (read and execute) that maps
// the whole file, a PT_GNU_STACK entry asking for a non-executable stack,
// then the code, whose first byte is the entry point. Nothing else: no
// sections, no interpreter, no dynamic linking.
const (
	emMachineX86_64  = 62
	emMachineAArch64 = 183

	loadAddr   = 0x400000 // where the file is mapped
	ehdrSize   = 64
	phdrSize   = 56
	phdrCount  = 2
	codeOffset = ehdrSize + phdrCount*phdrSize // 176, a multiple of 8
)

func elf(machine uint16, code []byte) []byte {
	size := codeOffset + len(code)
	b := make([]byte, 0, size)
	le := binary.LittleEndian
	// e_ident: magic, 64-bit, little-endian, version 1, System V ABI.
	b = append(b, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	b = le.AppendUint16(b, 2) // e_type: ET_EXEC
	b = le.AppendUint16(b, machine)
	b = le.AppendUint32(b, 1)                   // e_version
	b = le.AppendUint64(b, loadAddr+codeOffset) // e_entry
	b = le.AppendUint64(b, ehdrSize)            // e_phoff
	b = le.AppendUint64(b, 0)                   // e_shoff: no sections
	b = le.AppendUint32(b, 0)                   // e_flags
	b = le.AppendUint16(b, ehdrSize)            // e_ehsize
	b = le.AppendUint16(b, phdrSize)            // e_phentsize
	b = le.AppendUint16(b, phdrCount)           // e_phnum
	b = le.AppendUint16(b, 0)                   // e_shentsize
	b = le.AppendUint16(b, 0)                   // e_shnum
	b = le.AppendUint16(b, 0)                   // e_shstrndx
	b = le.AppendUint32(b, 1)                   // p_type: PT_LOAD
	b = le.AppendUint32(b, 5)                   // p_flags: PF_R|PF_X
	b = le.AppendUint64(b, 0)                   // p_offset
	b = le.AppendUint64(b, loadAddr)            // p_vaddr
	b = le.AppendUint64(b, loadAddr)            // p_paddr
	b = le.AppendUint64(b, uint64(size))        // p_filesz
	b = le.AppendUint64(b, uint64(size))        // p_memsz
	b = le.AppendUint64(b, 0x1000)              // p_align
	b = le.AppendUint32(b, 0x6474e551)          // p_type: PT_GNU_STACK
	b = le.AppendUint32(b, 6)                   // p_flags: PF_R|PF_W
	b = append(b, make([]byte, phdrSize-8)...)  // the rest: zero
	return append(b, code...)
}
