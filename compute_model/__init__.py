"""compute_model: per-phase computation regression (CRM), instruction prediction
table (IPT), distant point, physical trace (Panadero et al. §3).

Not implemented yet: see the compute-model issue. Nothing is exported.
"""

__all__: list[str] = []
