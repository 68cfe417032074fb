#!/usr/bin/env python3
"""The library's `add_f32_v` with parts of its work cut out (not part of the library).

Reads the family PTX of `add_f32` (from the image: `bundle/launch/add_f32.ptx`), keeps the
module header and the `add_f32_v` entry, and writes one PTX file per variant, each removing
branches so that the contiguous path is all that is left:

  ours       the entry as the image has it
  contig     no branch on the geometry's axis count or on element stride 2 (the contiguous
             path only, which is what a dense add takes)
  once       contig, and no grid-stride loop back (one chunk per thread: the launch covers
             every chunk, as the library's does)
  notail     once, and no tail of fewer than 4 elements (the sizes timed are multiples of 4)
  loop       ours without the grid-stride loop back only (every branch on the geometry kept)
  looptail   loop, and no tail

Each cut is one `@%pN bra` line found by what it tests; the script stops if a line is not
found exactly once, so a PTX of another build fails loudly rather than timing a wrong cut.
Usage: vec_variants.py FAMILY.ptx OUTDIR
"""
import re
import sys

src, outdir = sys.argv[1], sys.argv[2]
text = open(src).read()
header = text[: text.index(".visible .entry")]
start = text.index(".visible .entry add_f32_v(")
end = text.index("\n}\n", start) + 3
entry = text[start:end]


def pred_of(pattern):
    """The predicate register a `setp` matching `pattern` writes (exactly one match)."""
    found = re.findall(r"setp\.[a-z0-9.]+\s+(%p\d+),\s*" + pattern, entry)
    if len(found) != 1:
        sys.exit(f"vec_variants: {pattern!r} matched {len(found)} setp lines")
    return found[0]


def cut(body, pred):
    """`body` without the one conditional branch on `pred`."""
    lines = [l for l in body.split("\n") if re.fullmatch(r"\s*@" + re.escape(pred) + r" bra\s+\S+;", l)]
    if len(lines) != 1:
        sys.exit(f"vec_variants: {len(lines)} branches on {pred}")
    return body.replace(lines[0] + "\n", "", 1)


def and_pred(stride_pred):
    """The `and.pred` that combines 'ndim != 0' with a stride-2 test."""
    found = re.findall(r"and\.pred\s+(%p\d+),\s*%p\d+,\s*" + re.escape(stride_pred) + ";", entry)
    if len(found) != 1:
        sys.exit(f"vec_variants: no single and.pred of {stride_pred}")
    return found[0]


# ndim: `setp.ne.b32 pX, r, 0` (ndim != 0) and `setp.eq.b32 pY, r, 1` (ndim == 1) on the
# geometry's last word; stride 2: `setp.eq.b32 pZ, r, 2` per input, and-ed with ndim != 0.
ndim_r = re.search(r"ld\.param\.b32\s+(%r\d+), \[add_f32_v_param_2\+32\];", entry).group(1)
nonzero = pred_of(re.escape(ndim_r) + r", 0;")
is_one = pred_of(re.escape(ndim_r) + r", 1;")
stride2 = [and_pred(p) for p in re.findall(r"setp\.eq\.b32\s+(%p\d+),\s*%r\d+,\s*2;", entry)]
if len(stride2) != 2:
    sys.exit("vec_variants: expected two stride-2 tests")
# The loop's back edge: the only branch to the loop head from below it.
loop = re.findall(r"@(%p\d+) bra\s+(\$L__BB\d+_2);", entry)
if len(loop) != 1:
    sys.exit("vec_variants: expected one back edge")
# The tail: `and.pred` of 'ndim < 2' and 't < n'.
tail = re.findall(r"and\.pred\s+(%p\d+),\s*%p\d+,\s*%p\d+;", entry)
tail = [p for p in tail if p not in stride2]
if len(tail) != 1:
    sys.exit("vec_variants: expected one tail predicate")

variants = {"ours": entry}
contig = entry
for p in [is_one, nonzero] + stride2:
    contig = cut(contig, p)
variants["contig"] = contig
variants["once"] = cut(contig, loop[0][0])
variants["notail"] = cut(variants["once"], tail[0])
variants["loop"] = cut(entry, loop[0][0])
variants["looptail"] = cut(variants["loop"], tail[0])
for name, body in variants.items():
    with open(f"{outdir}/{name}.ptx", "w") as f:
        f.write(header + body)
    print(name, body.count("\n"), "lines")
