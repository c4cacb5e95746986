"""replay: simulate a physical trace with a LogGP/LogGOPS network model, in pieces
over MPI workers, and predict the runtime (Panadero et al. §2.3, Eq. 4).

Not implemented yet: see the replay issue. Nothing is exported.
"""

__all__: list[str] = []
