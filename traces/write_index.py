"""Write traces/README.md: the table of bundled traces, read from the files' own metadata
(so the command listed for each file is the one stored in it). Run by make_traces.sh."""

from __future__ import annotations

import shlex
from pathlib import Path

from signature import load_trace

HERE = Path(__file__).resolve().parent
HEAD = """# Bundled traces

Real traced runs of the example applications (`examples/`), made on a 2-core VM
(no hardware PMU, so every trace is in CPU-time mode) with MPICH from PyPI;
P = 8 and 16 ran oversubscribed on the 2 cores, with `MPIR_CVAR_ENABLE_HEAVY_YIELD=1`
(sigex sets it). Wall times are inflated by the oversubscription; burst thread CPU
times are not.

Layout: `traces/<app>/P<n>.h5` at the application's original workload,
`traces/<app>/small/P<n>.h5` at its small workload (for the distant point).
The file format is described in `docs/trace-format.md`.

Regenerate all of them from the repository root with `bash traces/make_traces.sh`
(`FORCE=1` replaces existing files). The exact command behind each file (also stored
in the file's `command` attribute):

| file | app | P | workload | events | runtime (s) | KiB | command |
|---|---|---|---|---|---|---|---|
"""


def main() -> None:
    rows = []
    for path in sorted(HERE.rglob("*.h5")):
        t = load_trace(path)
        rel = path.relative_to(HERE.parent)
        wl = f"{t.meta['workload_label']}={t.meta['workload_value']}"
        cmd = f"sigex trace -n {t.nprocs} -o {rel.parent}/ --workload {wl} -- {shlex.join(t.meta['command'])}"
        rows.append(f"| {rel} | {t.meta['app']} | {t.nprocs} | {wl} | {t.n_events} | "
                    f"{t.runtime:.2f} | {path.stat().st_size // 1024} | `{cmd}` |")
    (HERE / "README.md").write_text(HEAD + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
