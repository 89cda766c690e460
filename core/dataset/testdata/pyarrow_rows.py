"""The reference for core/dataset's Parquet reader (TestAgainstPyarrow).

Writes one table of task-like rows, with every column type a Hugging Face
dataset uses, as Parquet files the way pyarrow and `datasets` write them
(several codecs, page versions, row-group sizes, the legacy layouts), and
prints the rows as pyarrow reads them back, one JSON object per line, in
the rendering core/dataset documents: binary as base64, dates and times
by Python's isoformat, decimals in plain notation as strings, a map as an
object, NaN and infinities as null (as `datasets`' to_json writes them).

Usage: python pyarrow_rows.py OUT_DIR > expected.jsonl
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 300

SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("problem_statement", pa.large_string()),
        ("FAIL_TO_PASS", pa.list_(pa.string())),
        ("turns", pa.int64()),
        ("small", pa.int8()),
        ("u64", pa.uint64()),
        ("score", pa.float64()),
        ("score32", pa.float32()),
        ("solved", pa.bool_()),
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("blob", pa.large_binary()),
        ("digest", pa.binary(4)),
        ("matrix", pa.list_(pa.list_(pa.int32()))),
        ("embedding", pa.list_(pa.float32(), 3)),
        ("meta", pa.map_(pa.string(), pa.string())),
        ("day", pa.date32()),
        ("created_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("ns", tz="UTC")),
        ("logged_ms", pa.timestamp("ms", tz="UTC")),
        ("at", pa.time64("us")),
        ("price", pa.decimal128(12, 4)),
        ("big", pa.decimal128(38, 10)),
        ("level", pa.dictionary(pa.int32(), pa.string())),
    ]
)

TEXTS = ["", "a", 'é\n"\\', "日本語のテキスト", "emoji 🚀 and a combining é", "tab\tand\x01control", "x" * 5000]


def maybe(r: random.Random, v: Any) -> Any:
    return None if r.random() < 0.15 else v


def row(r: random.Random, i: int) -> dict[str, Any]:
    edge = i < 4  # the first rows hold the extremes
    t0 = datetime.datetime(1960, 1, 1)
    return {
        "instance_id": f"repo__proj-{i}",
        "problem_statement": maybe(r, r.choice(TEXTS) + str(i)),
        "FAIL_TO_PASS": maybe(r, [f"tests/t.py::test_{k}" for k in range(r.randrange(4))]),
        "turns": [2**63 - 1, -(2**63), 0, 1][i] if edge else maybe(r, r.randrange(-(10**12), 10**12)),
        "small": [127, -128, 0, None][i] if edge else maybe(r, r.randrange(-128, 128)),
        "u64": [2**64 - 1, 0, 2**63, None][i] if edge else maybe(r, r.randrange(2**64)),
        "score": [math.nan, math.inf, -0.0, 5e-324][i] if edge else maybe(r, r.uniform(-1e6, 1e6)),
        "score32": [0.1, 3.4028234663852886e38, -1.5, None][i] if edge else maybe(r, r.uniform(-1, 1)),
        "solved": maybe(r, r.random() < 0.5),
        "messages": maybe(
            r,
            [{"role": r.choice(["user", "assistant"]), "content": maybe(r, r.choice(TEXTS))} for _ in range(r.randrange(3))],
        ),
        "image": maybe(r, {"bytes": maybe(r, r.randbytes(r.randrange(8))), "path": maybe(r, f"img/{i}.png")}),
        "blob": maybe(r, r.randbytes(r.randrange(20))),
        "digest": maybe(r, r.randbytes(4)),
        "matrix": maybe(r, [maybe(r, [r.randrange(-9, 9) for _ in range(r.randrange(3))]) for _ in range(r.randrange(3))]),
        "embedding": maybe(r, [r.uniform(-1, 1) for _ in range(3)]),
        "meta": maybe(r, [(f"k{k}", maybe(r, r.choice(TEXTS))) for k in range(r.randrange(3))]),
        "day": maybe(r, datetime.date(1970, 1, 1) + datetime.timedelta(days=r.randrange(-40000, 40000))),
        "created_at": maybe(r, t0 + datetime.timedelta(microseconds=r.randrange(0, 3 * 10**15, r.choice([1, 10**6])))),
        "updated_at": maybe(r, r.randrange(0, 2 * 10**18, r.choice([1, 1000, 10**9]))),
        "logged_ms": maybe(r, r.randrange(-(10**12), 9 * 10**12)),
        "at": maybe(r, datetime.time(r.randrange(24), r.randrange(60), r.randrange(60), r.choice([0, r.randrange(10**6)]))),
        "price": maybe(r, decimal.Decimal(r.randrange(-(10**12), 10**12)).scaleb(-4)),
        "big": [decimal.Decimal(10**28 - 1).scaleb(-10), decimal.Decimal(-(10**28) + 1).scaleb(-10), decimal.Decimal(0).scaleb(-10), None][
            i
        ]
        if edge
        else maybe(r, decimal.Decimal(r.randrange(-(10**28), 10**28)).scaleb(-10)),
        "level": maybe(r, r.choice(["easy", "medium", "hard"])),
    }


def table() -> pa.Table:
    r = random.Random(20261128)
    cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for i in range(ROWS):
        for k, v in row(r, i).items():
            cols[k].append(v)
    arrays = []
    for f in SCHEMA:
        if pa.types.is_timestamp(f.type) and f.type.unit in ("ns", "ms"):  # given as counts of the unit
            arrays.append(pa.array(cols[f.name], type=pa.int64()).cast(f.type))
        elif pa.types.is_dictionary(f.type):
            arrays.append(pa.array(cols[f.name], type=pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(cols[f.name], type=f.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def write(t: pa.Table, out: Path) -> None:
    pq.write_table(t, out / "pyarrow-defaults.parquet")
    pq.write_table(
        t, out / "zstd-v2-nodict-rowgroups.parquet", compression="zstd", data_page_version="2.0", use_dictionary=False, row_group_size=7
    )
    pq.write_table(t, out / "gzip-small-pages.parquet", compression="gzip", data_page_size=512, write_statistics=False)
    pq.write_table(t, out / "legacy-lists.parquet", use_compliant_nested_type=False, compression="none")
    pq.write_table(t, out / "decimals-as-integers.parquet", store_decimal_as_integer=True)
    pq.write_table(t, out / "lz4.parquet", compression="lz4")
    pq.write_table(t, out / "int96-timestamps.parquet", use_deprecated_int96_timestamps=True, compression="brotli")
    # INT96 beyond nanoseconds' range (1677-2262): pyarrow reads it back in
    # the unit it stored; the reader under test refuses it (a clear error).
    far = pa.table({"at": pa.array([datetime.datetime(2300, 1, 1)], type=pa.timestamp("us"))})
    pq.write_table(far, out / "int96-beyond-2262.parquet", use_deprecated_int96_timestamps=True)
    # As a Hugging Face dataset is written by its own library. Its features
    # have no map or time of day: those columns are left out here.
    keep = [f.name for f in SCHEMA if not pa.types.is_map(f.type) and not pa.types.is_time(f.type)]
    datasets.Dataset(t.select(keep)).to_parquet(str(out / "datasets.parquet"))


def render(t: pa.DataType, v: Any) -> Any:
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return render(t.value_type, v)
    if pa.types.is_map(t):
        return {k: render(t.item_type, x) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [render(t.value_type, x) for x in v]
    if pa.types.is_struct(t):
        return {t.field(k).name: render(t.field(k).type, v[t.field(k).name]) for k in range(t.num_fields)}
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64encode(v).decode()
    if pa.types.is_floating(t):
        if math.isnan(v) or math.isinf(v):
            return None
        return float(str(np.float32(v))) if pa.types.is_float32(t) else v
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        return v.isoformat()
    if pa.types.is_decimal(t):
        return format(v, "f")
    return v


def main() -> None:
    out = Path(sys.argv[1])
    datasets.disable_progress_bars()
    write(table(), out)
    for r in pq.read_table(out / "pyarrow-defaults.parquet").to_pylist():
        print(json.dumps({f.name: render(f.type, r[f.name]) for f in SCHEMA}, ensure_ascii=False, allow_nan=False))


if __name__ == "__main__":
    main()
