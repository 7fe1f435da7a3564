"""XXH3-64 (seed 0, default secret) in pure Python: an implementation independent of the C++ code.

stagescope records the checksum of every tensor as XXH3-64 of its raw contiguous bytes (see
docs/run-file.md).  This module recomputes it from the published algorithm, with nothing but
the standard library, so a test can check a recorded checksum against a computation that
shares no code with the engine.  Slow (pure Python: about 1 s per MiB) and only for tests.

All multi-byte reads are little-endian; all arithmetic is modulo 2**64.
"""

import struct

M64 = (1 << 64) - 1

P32_1, P32_2, P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
MX1, MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25

# The 192-byte default secret of the XXH3 specification.
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)
STRIPE = 64  # bytes consumed by one accumulation round
LANES = 8


def r32(b, i):
    return struct.unpack_from("<I", b, i)[0]


def r64(b, i):
    return struct.unpack_from("<Q", b, i)[0]


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def bswap64(x):
    return int.from_bytes(x.to_bytes(8, "little"), "big")


def fold128(a, b):
    """Low 64 bits XOR high 64 bits of the 128-bit product a*b."""
    p = a * b
    return (p & M64) ^ (p >> 64)


def avalanche_xxh64(h):
    h ^= h >> 33
    h = (h * P64_2) & M64
    h ^= h >> 29
    h = (h * P64_3) & M64
    return h ^ (h >> 32)


def avalanche(h):
    h ^= h >> 37
    h = (h * MX1) & M64
    return h ^ (h >> 32)


def rrmxmx(h, n):
    h ^= rotl(h, 49) ^ rotl(h, 24)
    h = (h * MX2) & M64
    h ^= ((h >> 35) + n) & M64
    h = (h * MX2) & M64
    return h ^ (h >> 28)


def mix16(data, i, s):
    lo, hi = r64(data, i), r64(data, i + 8)
    return fold128(lo ^ r64(SECRET, s), hi ^ r64(SECRET, s + 8))


def _len_0_to_16(d, n):
    if n > 8:
        lo = r64(d, 0) ^ (r64(SECRET, 24) ^ r64(SECRET, 32))
        hi = r64(d, n - 8) ^ (r64(SECRET, 40) ^ r64(SECRET, 48))
        acc = (n + bswap64(lo) + hi + fold128(lo, hi)) & M64
        return avalanche(acc)
    if n >= 4:
        both = (r32(d, n - 4) + (r32(d, 0) << 32)) & M64
        return rrmxmx(both ^ (r64(SECRET, 8) ^ r64(SECRET, 16)), n)
    if n > 0:
        packed = (d[0] << 16) | (d[n >> 1] << 24) | d[n - 1] | (n << 8)
        return avalanche_xxh64(packed ^ (r32(SECRET, 0) ^ r32(SECRET, 4)))
    return avalanche_xxh64(r64(SECRET, 56) ^ r64(SECRET, 64))


def _len_17_to_128(d, n):
    acc = (n * P64_1) & M64
    # Pairs (front offset, back offset from the end) by size class, outermost first.
    rounds = [(0, 16)]
    if n > 32:
        rounds.append((16, 32))
    if n > 64:
        rounds.append((32, 48))
    if n > 96:
        rounds.append((48, 64))
    for k, (front, back) in enumerate(rounds):
        acc = (acc + mix16(d, front, 32 * k)) & M64
        acc = (acc + mix16(d, n - back, 32 * k + 16)) & M64
    return avalanche(acc)


def _len_129_to_240(d, n):
    acc = (n * P64_1) & M64
    for i in range(8):
        acc = (acc + mix16(d, 16 * i, 16 * i)) & M64
    acc = avalanche(acc)
    for i in range(8, n // 16):
        acc = (acc + mix16(d, 16 * i, 16 * (i - 8) + 3)) & M64
    # The last 16 bytes use the secret at (minimum secret size 136) - 17.
    acc = (acc + mix16(d, n - 16, 136 - 17)) & M64
    return avalanche(acc)


def _accumulate_stripe(acc, d, i, s):
    for lane in range(LANES):
        value = r64(d, i + 8 * lane)
        key = value ^ r64(SECRET, s + 8 * lane)
        acc[lane ^ 1] = (acc[lane ^ 1] + value) & M64
        acc[lane] = (acc[lane] + (key & 0xFFFFFFFF) * (key >> 32)) & M64


def _scramble(acc):
    s = len(SECRET) - STRIPE
    for lane in range(LANES):
        a = acc[lane]
        a ^= a >> 47
        a ^= r64(SECRET, s + 8 * lane)
        acc[lane] = (a * P32_1) & M64


def _len_long(d, n):
    acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1]
    stripes_per_block = (len(SECRET) - STRIPE) // 8
    block = STRIPE * stripes_per_block
    blocks = (n - 1) // block
    for b in range(blocks):
        for s in range(stripes_per_block):
            _accumulate_stripe(acc, d, b * block + s * STRIPE, s * 8)
        _scramble(acc)
    tail_stripes = ((n - 1) - block * blocks) // STRIPE
    for s in range(tail_stripes):
        _accumulate_stripe(acc, d, blocks * block + s * STRIPE, s * 8)
    _accumulate_stripe(acc, d, n - STRIPE, len(SECRET) - STRIPE - 7)
    result = (n * P64_1) & M64
    for k in range(4):
        m = fold128(acc[2 * k] ^ r64(SECRET, 11 + 16 * k), acc[2 * k + 1] ^ r64(SECRET, 19 + 16 * k))
        result = (result + m) & M64
    return avalanche(result)


def xxh3_64(data):
    """XXH3-64 of `data` (bytes-like) with seed 0 and the default secret."""
    d = bytes(data)
    n = len(d)
    if n <= 16:
        return _len_0_to_16(d, n)
    if n <= 128:
        return _len_17_to_128(d, n)
    if n <= 240:
        return _len_129_to_240(d, n)
    return _len_long(d, n)
