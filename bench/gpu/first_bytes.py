# Prints the first bytes of some exported functions of an x86-64 ELF shared library, from its .dynsym:
# whether a uprobe there hits an instruction the kernel emulates (push 55, a jump) or must single-step.
#   python3 bench/gpu/first_bytes.py LIBRARY FUNCTION...   (no dependencies: the GPU machine has no binutils)
import struct, sys
path, names = sys.argv[1], sys.argv[2:]
d = open(path, 'rb').read()
e_shoff, = struct.unpack_from('<Q', d, 0x28)
e_shentsize, e_shnum = struct.unpack_from('<HH', d, 0x3a)
secs = [struct.unpack_from('<IIQQQQIIQQ', d, e_shoff + i * e_shentsize) for i in range(e_shnum)]
dynsym = next(s for s in secs if s[1] == 11)
strtab = secs[dynsym[6]]
phoff, = struct.unpack_from('<Q', d, 0x20)
phentsize, phnum = struct.unpack_from('<HH', d, 0x36)
loads = [struct.unpack_from('<IIQQQQQQ', d, phoff + i * phentsize) for i in range(phnum)]
loads = [p for p in loads if p[0] == 1]
def off(va):
    for p in loads:
        if p[3] <= va < p[3] + p[5]:
            return va - p[3] + p[2]
n = dynsym[5] // 24
for i in range(n):
    name_off, info, other, shndx, value, size = struct.unpack_from('<IBBHQQ', d, dynsym[4] + i * 24)
    end = d.index(b'\0', strtab[4] + name_off)
    name = d[strtab[4] + name_off:end].decode()
    if name in names and value:
        o = off(value)
        print(name, d[o:o + 12].hex(' '))
