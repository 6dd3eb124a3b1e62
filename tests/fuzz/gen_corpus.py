#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz from the wire formats as docs/api.md
documents them (independently of the C++ encoder, so a drift between the two
shows up as seeds the decoders reject).

Each target gets valid encodings (one to four Domains, one to three groups, both backends, shm/tcp
style addresses, boundary lengths) plus a few truncated and corrupted ones,
so the fuzzer starts next to every branch of the decoder.

    tests/fuzz/gen_corpus.py            # rewrites tests/fuzz/corpus/
"""
import hashlib
import pathlib
import struct
import zlib

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def sealed(body):
    # Versions 2 and 3 end with the CRC-32 (zlib's) of everything before it.
    return body + struct.pack("<I", zlib.crc32(body))


def net_addr(backend, provider, instance, max_msg, domains, version=3, groups=1):
    """domains: every group's addresses, group-major (version 3 and later)."""
    out = b"FNA" + bytes([version, backend, len(provider)]) + provider
    out += struct.pack("<QI", instance, max_msg)
    if version >= 3:
        out += bytes([groups, len(domains) // groups])
    else:
        out += bytes([len(domains)])
    for d in domains:
        out += struct.pack("<H", len(d)) + d
    return sealed(out) if version >= 2 else out


def mr_desc(base, length, owner, keys, version=3, group=0):
    out = b"FMD" + bytes([version]) + struct.pack("<QQH", base, length, len(owner)) + owner
    if version >= 3:
        out += bytes([group])
    out += bytes([len(keys)])
    for addr_base, rkey in keys:
        out += struct.pack("<QQ", addr_base, rkey)
    return sealed(out) if version >= 2 else out


def verbs_address(gid, lid, mtu, qpn, nonce):
    # docs/verbs.md: FVA, version 1, GID, LID, MTU code, reserved, UD QPN, nonce.
    return b"FVA" + bytes([1]) + gid + struct.pack("<HBBIQ", lid, mtu, 0, qpn, nonce)


def verbs_handshake(kind, conn, sender, receiver_nonce, qpns_psns):
    out = b"FVH" + bytes([1, kind, 0]) + struct.pack("<HQ", 0, conn) + sender
    return out + struct.pack("<Q4I", receiver_nonce, *qpns_psns)


def sockaddr_in(port):
    # What tcp/sockets put in a Domain address: a sockaddr_in on 127.0.0.1.
    return struct.pack("<H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1]) + bytes(8)


ADDRS = [
    net_addr(1, b"shm", 0x1234_5678_9ABC_DEF0, 65536, [b"fi_shm_4242_0_a1b2c3d4\x00"]),
    net_addr(1, b"tcp;ofi_rxm", 1, 65536, [sockaddr_in(40001), sockaddr_in(40002)]),
    net_addr(1, b"sockets", 2**64 - 1, 1, [sockaddr_in(p) for p in (1, 2, 3, 4)]),
    net_addr(2, b"verbs", 7, 2**32 - 1, [bytes(range(20))]),
    net_addr(1, b"p" * 64, 0, 4096, [b"\xff" * 256]),
    net_addr(1, b"tcp;ofi_rxm", 3, 65536, [sockaddr_in(40010 + p) for p in range(6)], groups=3),
]
DESCS = [
    mr_desc(0x7F00_0000_1000, 1 << 20, ADDRS[0], [(0x7F00_0000_1000, 0x42)]),
    mr_desc(0, 4096, ADDRS[1], [(0, 1), (0, 2)]),
    mr_desc(2**64 - 2, 1, ADDRS[2], [(i, 2**64 - 1 - i) for i in range(4)]),
    mr_desc(0x1000, 2**63, ADDRS[3], [(0x1000, 0xABCD)]),
    mr_desc(0x2000, 8192, ADDRS[5], [(0x2000, 5), (0x2000, 6)], group=2),
]
# What older builds wrote: refused with "unsupported version 1" / "2".
OLD_ADDR = net_addr(1, b"shm", 5, 65536, [b"fi_shm_1_0\x00"], version=1)
OLD_DESC = mr_desc(0x1000, 4096, OLD_ADDR, [(0x1000, 1)], version=1)
V2_ADDR = net_addr(1, b"shm", 6, 65536, [b"fi_shm_2_0\x00"], version=2)
V2_DESC = mr_desc(0x1000, 4096, V2_ADDR, [(0x1000, 1)], version=2)


ROCE_GID = bytes(10) + b"\xff\xff" + bytes([198, 18, 0, 1])
VERBS = [
    verbs_address(ROCE_GID, 0, 3, 0x11, 0x0123456789ABCDEF),
    verbs_address(bytes([0xFE, 0x80]) + bytes(14), 7, 5, 0xFFFFFF, 0),
]
VERBS += [
    verbs_handshake(1, 0xFEEDFACECAFEBEEF, VERBS[0], 42, (0x12, 0x13, 0xFFFFFE, 0x10000)),
    verbs_handshake(2, 1, VERBS[1], 0, (0xFFFFFF, 1, 0, 0)),
]


def damaged(valid):
    """Truncations and corruptions of one valid encoding."""
    out = [valid[:n] for n in (0, 3, 4, len(valid) // 2, len(valid) - 1)]
    out.append(valid + b"\x00")                      # trailing byte
    out.append(valid[:4] + b"\x02" + valid[5:])      # a header byte off by one
    out.append(valid[:3] + b"\x04" + valid[4:])      # unsupported version
    out.append(valid[:-5] + bytes([valid[-5] ^ 1]) + valid[-4:])  # checksum mismatch
    return out


def text(prefix, data):
    return (prefix + data.hex()).encode()


def write(target, seeds):
    folder = ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for seed in dict.fromkeys(seeds):  # unique, in order
        name = hashlib.sha1(seed).hexdigest()[:16]
        (folder / name).write_bytes(seed)


def main():
    write("net_addr_decode",
          ADDRS + [OLD_ADDR, V2_ADDR] + damaged(ADDRS[1]) + damaged(ADDRS[2]) + damaged(ADDRS[5]))
    write("mr_desc_decode",
          DESCS + [OLD_DESC, V2_DESC] + damaged(DESCS[0]) + damaged(DESCS[2]) + damaged(DESCS[4]))
    write("net_addr_parse",
          [text("fna3:", a) for a in ADDRS]
          + [text("fna3:", a).upper().replace(b"FNA3:", b"fna3:") for a in ADDRS[:1]]
          + [text("fna3:", a)[:-1] for a in ADDRS[:1]]
          + [b"fna3:", b"fna3:zz", b"fmd3:00", text("fna1:", OLD_ADDR), text("fna2:", V2_ADDR)])
    write("mr_desc_parse",
          [text("fmd3:", d) for d in DESCS]
          + [text("fmd3:", d).upper().replace(b"FMD3:", b"fmd3:") for d in DESCS[:1]]
          + [text("fmd3:", d)[:-1] for d in DESCS[:1]]
          + [b"fmd3:", b"fmd3:0g", b"fna3:00", text("fmd1:", OLD_DESC), text("fmd2:", V2_DESC)])
    write("verbs_wire_decode", VERBS + damaged(VERBS[0]) + damaged(VERBS[2]))
    write("cpuset_parse",
          [b"", b"0", b"0-3", b"0-3,8,10-11", b"1048576", b"0-1048576", b"3-1",
           b"0,,1", b"-1", b"1-", b"0-7,16-23,8-15", b"00,01", b"4294967296",
           # Reproducer of the finding in docs/reliability.md: used to ask for 2 GiB.
           b"0-1048576," * 400 + b"0"])


if __name__ == "__main__":
    main()
