"""Regenerate the committed trace slices and the tiny raw samples the importer tests read.

    python traces/make_slices.py --src RAW            # from the repository root
    python traces/make_slices.py --src RAW --rows 5000

Reads the raw traces from ``--src`` (or the ``DCSIM_RAW_TRACES`` environment variable): a
folder holding the public samples in their own formats, laid out as

* ``azure_vm_2017_rnn/`` — the Azure 2017 (V1) VM table in the rnn encoding (its splits and
  ``v1.interval_map.txt``);
* ``alibaba_v2018_sample/alibaba2018_batch_task_sample.csv`` and
  ``alibaba2018_container_meta_sample.csv`` — samples of the Alibaba cluster-trace-v2018;
* ``azure_packing_2020_sample/vm_requests_first5000_machine16.csv`` and
  ``vm_types_machine16.csv`` — the Azure Packing 2020 trace, machine type 16;

converts them with :mod:`dcsim.workload.importers` and writes

* ``traces/azure2017_dev_slice.csv`` — the first ``rows`` VMs of the Azure 2017 dev split;
* ``traces/alibaba2018_slice.csv`` — the first ``rows`` Alibaba 2018 batch tasks by arrival;
* ``traces/azure2020_slice.csv`` — the Azure 2020 sample (5,000 requests), converted;
* ``traces/alibaba2018_container_meta_slice.csv`` — the first ``rows`` Alibaba 2018
  ``container_meta`` lines by time stamp (the Nara authors' Alibaba set is drawn from them);
* ``traces/azure2020_vmtypes_machine16.csv`` — the Azure 2020 ``vmType`` rows of machine
  type 16 (all that is public here; the Nara authors' Azure set is drawn from ``vmType``);
* ``tests/data/traces/…`` — a few raw lines of each trace in its own format.

The output is deterministic: running it twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dcsim.workload.importers import (  # noqa: E402
    import_alibaba2018,
    import_alibaba2018_containers,
    import_azure2017,
    import_azure2020,
    import_azure2020_vmtypes,
)
from dcsim.workload.trace_import import write_table  # noqa: E402

AZ17 = "azure_vm_2017_rnn"
ALI = "alibaba_v2018_sample/alibaba2018_batch_task_sample.csv"
AZ20 = "azure_packing_2020_sample/vm_requests_first5000_machine16.csv"
ALI_CM = "alibaba_v2018_sample/alibaba2018_container_meta_sample.csv"
AZ20_TYPES = "azure_packing_2020_sample/vm_types_machine16.csv"


def make_slices(src: Path, out: Path, rows: int = 5000) -> list[Path]:
    """Write the five converted slices into ``out``."""
    written = [
        write_table(import_azure2017(src / AZ17, "dev").head(rows),
                    out / "azure2017_dev_slice.csv"),
        write_table(import_alibaba2018(src / ALI).head(rows), out / "alibaba2018_slice.csv"),
        write_table(import_azure2020(src / AZ20).head(rows), out / "azure2020_slice.csv"),
        write_table(import_alibaba2018_containers(src / ALI_CM).head(rows),
                    out / "alibaba2018_container_meta_slice.csv"),
        write_table(import_azure2020_vmtypes(src / AZ20_TYPES, machine_id=16),
                    out / "azure2020_vmtypes_machine16.csv"),
    ]
    return written


def make_raw_samples(src: Path, out: Path) -> list[Path]:
    """Write a few raw lines of each trace, in its own format, into ``out``."""
    az = out / "azure2017"
    az.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("flav_map.txt", "v1.dev.txt", "v1.dev.c2100000.txt"):
        lines = (src / AZ17 / name).read_text().splitlines(keepends=True)
        keep = lines if name == "flav_map.txt" else lines[:4] + lines[-3:]
        (az / name).write_text("".join(keep))
        written.append(az / name)

    lines = (src / ALI).read_text().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    picked = set(range(300))
    for test in (lambda f: f[4] != "Terminated",            # other statuses
                 lambda f: f[7] == "" or f[8] == "",        # missing plan
                 lambda f: f[6] < f[5] and f[7] and f[8]):  # end before start, planned
        hits = [i for i, line in enumerate(body) if i >= 300
                and _ali_fields(line) and test(_ali_fields(line))]
        picked.update(hits[:5])
    path = out / "alibaba2018_batch_task_head.csv"
    path.write_text(header + "".join(body[i] for i in sorted(picked)))
    written.append(path)

    lines = (src / AZ20).read_text().splitlines(keepends=True)
    nulls = [i for i, line in enumerate(lines[1:], 1) if line.split(",")[4] == ""][:10]
    keep = sorted(set(range(1, 201)) | set(nulls))
    path = out / "azure2020_requests_head.csv"
    path.write_text(lines[0] + "".join(lines[i] for i in keep))
    written.append(path)

    lines = (src / ALI_CM).read_text().splitlines(keepends=True)
    path = out / "alibaba2018_container_meta_head.csv"
    path.write_text("".join(lines[:40]))
    written.append(path)

    lines = (src / AZ20_TYPES).read_text().splitlines(keepends=True)
    path = out / "azure2020_vm_types_head.csv"
    path.write_text("".join(lines[:41]))
    written.append(path)
    return written


def _ali_fields(line: str) -> list | None:
    f = line.rstrip("\n").split(",")
    if len(f) != 9:
        return None
    try:
        f[5], f[6] = int(f[5]), int(f[6])
    except ValueError:
        return None
    return f


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    env = os.environ.get("DCSIM_RAW_TRACES")
    ap.add_argument("--src", type=Path, default=Path(env) if env else None,
                    help="folder of the raw traces (default: $DCSIM_RAW_TRACES)")
    ap.add_argument("--out", type=Path, default=ROOT / "traces")
    ap.add_argument("--tests-out", type=Path, default=ROOT / "tests" / "data" / "traces")
    ap.add_argument("--rows", type=int, default=5000)
    args = ap.parse_args(argv)
    if args.src is None or not args.src.is_dir():
        print(f"no raw traces at {args.src} (pass --src or set DCSIM_RAW_TRACES)",
              file=sys.stderr)
        return 1
    for p in make_slices(args.src, args.out, args.rows) + make_raw_samples(args.src,
                                                                           args.tests_out):
        print(f"{p}  {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
