#!/usr/bin/env python3
"""gpu-bench.sh's bar chart: one horizontal bar per figure of bench.json
(frames/s), labelled, as a PNG. Standard library only (zlib, struct): GPU
machines often have python3 but no matplotlib. Text is drawn with a 3x5 pixel
font, so labels are upper case.

    gpu-bench-plot.py bench.json bench.png
"""
import json
import struct
import sys
import zlib

# 3x5 glyphs: five rows of three bits, top row first.
FONT = {
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011",
    "D": "110101101101110", "E": "111100110100111", "F": "111100110100100",
    "G": "011100101101011", "H": "101101111101101", "I": "111010010010111",
    "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010",
    "P": "110101110100100", "Q": "010101101110011", "R": "110101110101101",
    "S": "011100010001110", "T": "111010010010010", "U": "101101101101111",
    "V": "101101101101010", "W": "101101111111101", "X": "101101010101101",
    "Y": "101101010010010", "Z": "111001010100111", "0": "111101101101111",
    "1": "010110010010111", "2": "110001010100111", "3": "110001010001110",
    "4": "101101111001001", "5": "111100110001110", "6": "011100111101111",
    "7": "111001010010010", "8": "111101111101111", "9": "111101111001110",
    ".": "000000000000010", ",": "000000000010100", ":": "000010000010000",
    "-": "000000111000000", "/": "001001010100100", "(": "010100100100010",
    ")": "010001001001010", "=": "000111000111000", "!": "010010010000010",
    "%": "101001010100101", "+": "000010111010000", ">": "100010001010100",
}
SCALE = 2  # pixels per font pixel
CHAR_W, LINE_H = 4 * SCALE, 6 * SCALE
COLOURS = {"decode": (70, 110, 190), "frame": (60, 150, 90),
           "nvdec": (200, 120, 40), "reference": (150, 150, 150)}


def main(json_path, png_path):
    bench = json.load(open(json_path))
    rows = [f for f in bench["figures"]]
    if not rows:
        sys.exit("no figures")
    label_w = max(len(f["label"]) for f in rows) * CHAR_W + 10
    bar_w, row_h, top = 420, LINE_H + 8, 3 * LINE_H + 8
    width = label_w + bar_w + 32 * CHAR_W
    height = top + row_h * len(rows) + 8
    img = [[(255, 255, 255)] * width for _ in range(height)]

    def text(x, y, s, colour=(0, 0, 0)):
        for ch in s.upper():
            glyph = FONT.get(ch)
            if glyph:
                for i, bit in enumerate(glyph):
                    if bit == "1":
                        fill(x + i % 3 * SCALE, y + i // 3 * SCALE, SCALE, SCALE, colour)
            x += CHAR_W

    def fill(x, y, w, h, colour):
        for yy in range(max(y, 0), min(y + h, height)):
            row = img[yy]
            for xx in range(max(x, 0), min(x + w, width)):
                row[xx] = colour

    gpu = bench.get("gpu", {})
    text(4, 4, "GPUFAN GPU-BENCH, FRAMES/S (STEADY STATE, MEDIAN OF %s RUNS)"
         % bench.get("runs_per_figure", "?"))
    text(4, 4 + LINE_H, "%s %s %s" % (gpu.get("name", ""), gpu.get("driver", ""),
                                      bench.get("date", "")))
    best = max([f["fps"] or 0 for f in rows] + [1])
    for n, f in enumerate(rows):
        y = top + n * row_h
        text(4, y + 2, f["label"])
        if f["fps"] is None:
            text(label_w, y + 2, f["status"], (180, 0, 0))
            continue
        group = "reference" if f["key"].startswith("reference") else f["group"]
        w = max(1, int(bar_w * f["fps"] / best))
        fill(label_w, y, w, row_h - 4, COLOURS.get(group, (100, 100, 100)))
        vs = " (%.2f OF %s)" % (f["vs_base"], f["base"]) if f.get("vs_base") else ""
        text(label_w + w + 4, y + 2, "%.0f%s" % (f["fps"], vs))

    raw = b"".join(b"\0" + bytes(c for px in row for c in px) for row in img)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    with open(png_path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n"
                  + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 9))
                  + chunk(b"IEND", b""))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
