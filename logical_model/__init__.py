"""logical_model: relate phases across P, infer communication rules, fit volumes,
weights and work, and write the logical trace for any P (Panadero et al. §2.2).

Not implemented yet: see the logical-model issue. Nothing is exported.
"""

__all__: list[str] = []
