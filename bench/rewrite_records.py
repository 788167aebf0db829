"""A copy of a record set whose `node_features` column is written another way (BENCHMARKS.md
section 19): what reading the records would cost if GraphFlat's writer wrote the column so.
Every other column as GraphFlat writes it (zstd, no dictionary), the same schema (its lists'
items named `item`, as GraphFlat names them) and metadata, the same row groups (one split each), and a manifest (format 2, the block CRC-32s of
the new parts) so that `graphflat.open_records` reads and checks it as a flatten's output.

    python bench/rewrite_records.py RECORDS OUT [--compression none|lz4|zstd] [--dictionary]

Needs pyarrow; reads the parts one row group at a time.
"""

import argparse
import base64
import json
import os
import zlib

import pyarrow as pa
import pyarrow.parquet as pq

BLOCK = 256 << 10
KEY = b"graphflat.manifest"


def blocks_and_crc(path):
    crcs, whole = [], 0
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            crcs.append(zlib.crc32(block))
            whole = zlib.crc32(block, whole)
    raw = b"".join(c.to_bytes(4, "little") for c in crcs)
    return base64.b64encode(raw).decode(), whole


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("out")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--dictionary", action="store_true")
    args = parser.parse_args()
    meta = pq.read_metadata(os.path.join(args.records, "_manifest.parquet")).metadata
    manifest = json.loads(meta[KEY])
    os.makedirs(args.out, exist_ok=True)
    parts = []
    for part in manifest["parts"]:
        source = pq.ParquetFile(os.path.join(args.records, part["name"]))
        schema = source.schema_arrow
        leaves = [source.metadata.schema.column(i).path for i in range(source.metadata.num_columns)]
        features = [c for c in leaves if c.startswith("node_features.")]
        compression = {c: args.compression if c in features else "zstd" for c in leaves}
        dictionary = features if args.dictionary else []
        where = os.path.join(args.out, part["name"])
        with pq.ParquetWriter(
            where, schema, compression=compression, use_dictionary=dictionary, use_compliant_nested_type=False
        ) as writer:
            for i in range(source.num_row_groups):
                table = source.read_row_group(i)
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
        blocks, crc = blocks_and_crc(where)
        parts.append(dict(part, bytes=os.path.getsize(where), crc32=crc, blocks=blocks))
    manifest.update(parts=parts, bytes=sum(p["bytes"] for p in parts))
    empty = source.schema_arrow.empty_table()
    empty = empty.replace_schema_metadata({**(empty.schema.metadata or {}), KEY: json.dumps(manifest).encode()})
    pq.write_table(empty, os.path.join(args.out, "_manifest.parquet"))
    open(os.path.join(args.out, "_SUCCESS"), "w").close()
    print(f"{args.out}: {len(parts)} parts, {manifest['bytes'] / 1e6:.0f} MB (node_features {args.compression}"
          f"{', dictionary' if args.dictionary else ', no dictionary'})")


if __name__ == "__main__":
    main()
