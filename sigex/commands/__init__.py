"""The ``sigex`` commands, one module each (git-style): its parser and its handler side by side.

Every module has ``NAME``, ``HELP``, ``add_parser(subparsers)`` that declares its options and
ends its help with an example that runs on the bundled traces, and ``run(opts) -> int`` that
checks the inputs and outputs, calls one library function and formats the result. Modules
import the packages lazily, so ``sigex --help`` loads no model code and starts no MPI.
"""

from . import (calibrate, compare_machines, extrapolate, ipt, physical, predict, replay, run,
               scaling, show, signature, simgrid, trace)

#: in the order ``sigex --help`` lists them: the pipeline's order
COMMANDS = (trace, show, signature, extrapolate, ipt, physical, replay, simgrid, calibrate, predict,
            scaling, compare_machines, run)

__all__ = ["COMMANDS"]
