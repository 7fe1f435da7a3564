#!/usr/bin/env bash
# Renders the fixture comparison report in headless Chromium and checks that the screenshot
# is not blank and that the DOM holds non-empty SVG charts.  Exit 77 (skipped) without Chromium.
# Usage: render_html.sh MAKE_REPORT_FIXTURE OUTDIR
set -euo pipefail
tool="$1"; out="$2"
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -z "$browser" ]; then
  echo "SKIP: no chromium found (install the Debian package 'chromium')"
  exit 77
fi
mkdir -p "$out"
html="$out/report.html"
"$tool" "$html"
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --user-data-dir="$out/profile" --window-size=1400,2000)
rm -f "$out/report.png"
timeout 120 "$browser" "${flags[@]}" --screenshot="$out/report.png" "file://$html" \
  >"$out/chromium.log" 2>&1 || { cat "$out/chromium.log"; exit 1; }
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$html" >"$out/dom.html" 2>>"$out/chromium.log"
python3 - "$out/report.png" "$out/dom.html" <<'PY'
import re, struct, sys, zlib
png, dom = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp + 1
rows, prev = [], bytearray(w * bpp)
for y in range(h):
    f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
    for x in range(len(line)):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
colors = set()
for y in range(0, h, 7):
    r = rows[y]
    for x in range(0, w, 7):
        colors.add(r[x * bpp:x * bpp + 3])
nonwhite = sum(1 for y in range(0, h, 5) for x in range(0, w, 5)
               if rows[y][x * bpp:x * bpp + 3] not in (b"\xff\xff\xff", b"\xf9\xfa\xfb"))
print(f"screenshot {w}x{h}: {len(colors)} distinct colours, {nonwhite} non-background samples")
assert len(colors) > 20, "screenshot looks blank"
assert nonwhite > 2000, "screenshot looks blank"
svgs = re.findall(r"<svg[^>]*>(.*?)</svg>", dom, re.S)
filled = [s for s in svgs if "<path" in s or "<rect" in s]
print(f"DOM: {len(svgs)} svg elements, {len(filled)} with drawn marks")
assert len(filled) >= 4, "too few non-empty SVG charts in the rendered DOM"
for id_ in ("loss-chart", "grad-chart", "verdict"):
    assert f'id="{id_}"' in dom, id_
print("OK")
PY
