"""Machine profiles: the network and compute parameters a replay runs under.

A profile is a small TOML file::

    name = "cluster-a"
    description = "InfiniBand HDR cluster, 64 cores per node"

    [network]            # inter-node LogGP/LogGOPS parameters (seconds, bytes)
    L = 1.5e-6           # latency
    o = 0.5e-6           # CPU overhead per message (send and receive side)
    g = 0.2e-6           # gap between consecutive messages of one rank
    G = 4.0e-11          # time per byte (1 / bandwidth)
    O = 0.0              # CPU overhead per byte (LogGOPS)
    S = 65536            # eager/rendezvous threshold: messages of >= S bytes wait for the receiver

    [compute]
    speed = 1.0          # compute speed relative to the traced machine (2.0: bursts take half the time)

    [node]
    cores = 64           # ranks per node (consecutive world ranks share a node)

    [intra]              # optional: parameters between ranks of one node (default: the network's)
    L = 0.3e-6
    o = 0.2e-6
    g = 0.05e-6
    G = 1.0e-10
    O = 0.0

Times are seconds and sizes bytes. ``load(path)`` reads and checks a file,
``Machine.to_toml()`` writes one; ``sigex calibrate`` measures a profile on the
machine it runs on.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any

from signature.errors import SigexError
from signature._files import write_text_atomic

__all__ = ["LogGP", "Machine", "MachineError", "load", "MACHINES_DIR"]

#: The profiles shipped with sigex (``machines/*.toml`` at the repository root).
MACHINES_DIR = Path(__file__).resolve().parents[1] / "machines"


class MachineError(SigexError):
    """A machine profile is missing, malformed or physically impossible.

    Exit status 2: the profile named on the command line must change."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class LogGP:
    """LogGP/LogGOPS parameters of one kind of link (seconds; G and O per byte)."""

    L: float
    o: float
    g: float
    G: float
    O: float = 0.0  # noqa: E741 (LogGOPS name)

    def check(self, where: str) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise MachineError(f"{where}: {f.name} must be a finite number >= 0, got {v!r}")


@dataclasses.dataclass(frozen=True)
class Machine:
    """A target machine: inter-node network, optional intra-node link, eager threshold,
    relative compute speed and ranks per node."""

    name: str
    network: LogGP
    S: int = 65536
    speed: float = 1.0
    cores: int = 1
    intra: LogGP | None = None
    description: str = ""

    def link(self, intra: bool) -> LogGP:
        """The parameters between two ranks (``intra``: on the same node)."""
        return self.intra if (intra and self.intra is not None) else self.network

    def flat(self) -> "Machine":
        """The same machine with one rank per node: every pair of ranks talks over the
        network (what a SimGrid cluster of single-core hosts describes)."""
        return dataclasses.replace(self, cores=1, intra=None)

    def node_of(self, rank):
        """Node index of world rank(s): consecutive ranks fill a node."""
        return rank // self.cores

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "description": self.description,
                             "network": {**dataclasses.asdict(self.network), "S": self.S},
                             "compute": {"speed": self.speed}, "node": {"cores": self.cores}}
        if self.intra is not None:
            d["intra"] = dataclasses.asdict(self.intra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "<machine>") -> "Machine":
        unknown = set(d) - {"name", "description", "network", "compute", "node", "intra"}
        if unknown:
            raise MachineError(f"{where}: unknown keys {sorted(unknown)} (expected name, description, "
                               "[network], [compute], [node], [intra])")
        for table, keys in (("compute", {"speed"}), ("node", {"cores"}), ("intra", None)):
            if table in d and not isinstance(d[table], dict):
                raise MachineError(f"{where}: [{table}] must be a table")
            if keys is not None and set(d.get(table, {})) - keys:
                raise MachineError(f"{where}: unknown [{table}] keys "
                                   f"{sorted(set(d[table]) - keys)} (expected {', '.join(sorted(keys))})")
        if not isinstance(d.get("network"), dict):
            raise MachineError(f"{where}: no [network] table (L, o, g, G, O, S); "
                               f"see {MACHINES_DIR}/ for examples")
        net = dict(d["network"])
        S = net.pop("S", 65536)
        missing = [k for k in ("L", "o", "g", "G") if k not in net]
        if missing:
            raise MachineError(f"{where}: [network] lacks {', '.join(missing)}")
        unknown = set(net) - {"L", "o", "g", "G", "O"}
        if unknown:
            raise MachineError(f"{where}: unknown [network] keys {sorted(unknown)} "
                               "(expected L, o, g, G, O, S)")
        network = LogGP(**net)
        network.check(f"{where} [network]")
        intra = None
        if "intra" in d:
            raw = {k: d["intra"].get(k, getattr(network, k)) for k in ("L", "o", "g", "G", "O")}
            unknown = set(d["intra"]) - set(raw)
            if unknown:
                raise MachineError(f"{where}: unknown [intra] keys {sorted(unknown)}")
            intra = LogGP(**raw)
            intra.check(f"{where} [intra]")
        speed = d.get("compute", {}).get("speed", 1.0)
        cores = d.get("node", {}).get("cores", 1)
        if (isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0
                or not math.isfinite(speed)):
            raise MachineError(f"{where}: [compute] speed must be > 0, got {speed!r}")
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise MachineError(f"{where}: [node] cores must be an integer >= 1, got {cores!r}")
        if isinstance(S, bool) or not isinstance(S, int) or S < 0:
            raise MachineError(f"{where}: [network] S must be an integer number of bytes >= 0")
        return cls(name=str(d.get("name") or Path(where).stem), network=network, S=S,
                   speed=float(speed), cores=cores, intra=intra,
                   description=str(d.get("description", "")))

    def to_toml(self) -> str:
        def table(name: str, values: dict[str, Any]) -> list[str]:
            return [f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items()] + [""]

        d = self.to_dict()
        lines = [f"name = {_toml_value(self.name)}"]
        if self.description:
            lines.append(f"description = {_toml_value(self.description)}")
        lines.append("")
        for key in ("network", "compute", "node", "intra"):
            if key in d:
                lines += table(key, d[key])
        return "\n".join(lines)

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the profile as TOML, atomically; an existing file is kept unless ``overwrite``."""
        return write_text_atomic(path, self.to_toml(), overwrite=overwrite)


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def load(path: str | Path) -> Machine:
    """Read a machine profile. A bare name (``cluster-a``) is looked up among the
    shipped profiles."""
    p = Path(path)
    if not p.exists() and p.suffix == "" and (MACHINES_DIR / f"{p.name}.toml").exists():
        p = MACHINES_DIR / f"{p.name}.toml"
    if not p.exists():
        shipped = ", ".join(sorted(x.stem for x in MACHINES_DIR.glob("*.toml"))) or "none"
        raise MachineError(f"{path}: no such machine file (shipped profiles: {shipped}; "
                           "`sigex calibrate -o my.toml` measures this machine)")
    try:
        d = tomllib.loads(p.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise MachineError(f"{p}: not a readable TOML machine profile ({err})") from err
    return Machine.from_dict(d, where=str(p))
